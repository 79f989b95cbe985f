import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors } from './support/doc-example';

// Runs the example of docs/client.md as the page shows it, against an engine that only
// reacts to pokes (it polls once a minute).

@DurableFsm({ name: 'order', queue: 'orders' })
class OrderFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() ship(ctx: StepContext) {
    return done({ paid: ctx.awaited[0]?.payload ?? null });
  }
}

describe('docs/client.md: the example', () => {
  let db: TestDatabase;
  let h: Harness;
  const { module, file } = loadDocExample<{
    clientExample(url: string): Promise<string>;
  }>('client.md', 'client');

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [OrderFsm], {
      queues: { orders: 2 },
      poke: 'postgres',
      pollInterval: 60_000,
      maxPollInterval: 60_000,
    });
  });
  afterAll(async () => {
    await h?.close();
    await db?.drop();
  });

  it('type-checks under the strict tsconfig', () => {
    expect(typeErrors([file])).toEqual([]);
  });

  it('inserts and signals; the engine runs the order to its end', async () => {
    const id = await module.clientExample(db.url);
    expect(await h.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { paid: { amount: 1200 } },
    });
  });
});
