// The assistant FSM driven inline by gen-durable/testing against a real PostgreSQL: its stream,
// its signed approval URL (delivered with engine.deliverCallback, what the callbacks route
// does) and its end. test/browser/assistant-stream.spec.ts runs it in the sample with a page.
import { Test } from '@nestjs/testing';

import { CallbackTokenError, EngineService, GenDurableModule } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { trackResource } from '../../test/support/open-resources';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database';
import { ANSWER_STREAM, type AnswerChunk } from './answer-chunk';
import { AssistantFsm } from './assistant.fsm';
import { FakeModel } from './fake-model';

describe('AssistantFsm', () => {
  let db: TestDatabase;
  let engine: EngineService;
  let gd: GenDurableTesting;
  let close: () => Promise<void>;
  const savedDelay = process.env['SAMPLE_ASSISTANT_TOKEN_MS'];

  beforeAll(async () => {
    process.env['SAMPLE_ASSISTANT_TOKEN_MS'] = '0';
    db = await createTestDatabase();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: await db.dataSource(),
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
          callbacks: {
            secret: 'assistant-spec-secret-of-at-least-32-chars',
            baseUrl: 'http://sample.test/durable/callbacks',
          },
        }),
      ],
      providers: [AssistantFsm, FakeModel],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('assistant testing module', () => open);
    close = async () => {
      await moduleRef.close();
      open = false;
    };
    engine = moduleRef.get(EngineService);
    gd = GenDurableTesting.forEngine(engine);
  });
  afterAll(async () => {
    await close();
    await db.drop();
    if (savedDelay === undefined) delete process.env['SAMPLE_ASSISTANT_TOKEN_MS'];
    else process.env['SAMPLE_ASSISTANT_TOKEN_MS'] = savedDelay;
  });

  const chunks = async (id: string): Promise<{ offset: number; chunk: AnswerChunk }[]> => {
    const read: { offset: number; chunk: AnswerChunk }[] = [];
    for await (const c of engine.readStream<AnswerChunk>(id, ANSWER_STREAM, { follow: false })) {
      read.push(c);
    }
    return read;
  };

  it('streams its answer, publishes a single-use approval URL, and finishes with the approval', async () => {
    const id = await engine.insert(AssistantFsm, { state: { prompt: 'why?' } });
    await gd.drain();
    await gd.assertAwaiting({ id }, 'approved');

    const streamed = await chunks(id);
    expect(streamed.map((c) => c.offset)).toEqual(streamed.map((_, i) => i));
    expect(streamed[0]!.chunk).toEqual({ type: 'start', attempt: 0 });
    const tokens = streamed.filter((c) => c.chunk.type === 'token');
    expect(tokens).toHaveLength(streamed.length - 2);
    const approval = streamed.at(-1)!.chunk;
    if (approval.type !== 'approval') throw new Error(`last chunk: ${JSON.stringify(approval)}`);
    expect(approval.url.startsWith('http://sample.test/durable/callbacks/')).toBe(true);

    const token = approval.url.slice(approval.url.lastIndexOf('/') + 1);
    expect(await engine.deliverCallback(token, { approvedBy: 'dana' })).toEqual({
      duplicate: false,
    });
    await expect(engine.deliverCallback(token, {})).rejects.toBeInstanceOf(CallbackTokenError);
    await gd.drain();

    const answer = tokens
      .map((c) => (c.chunk.type === 'token' ? c.chunk.token : ''))
      .join('')
      .trim();
    await gd.assertDone({ id }, { answer, approval: { approvedBy: 'dana' } });
    expect((await chunks(id)).at(-1)!.chunk).toEqual({
      type: 'finished',
      approval: { approvedBy: 'dana' },
    });
  });
});
