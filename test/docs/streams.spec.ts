import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/streams.md exactly as the page shows it.
describe('docs/streams.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module, source } = loadDocExample<{
    AssistantFsm: Type<unknown>;
    example(engine: EngineService): Promise<{ shown: string; last: number }>;
  }>('streams.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.AssistantFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('reads the answer as the page says, its chunks stored with dense offsets', async () => {
    const result = await module.example(t.engine);
    expect(result).toEqual({ shown: 'You asked: why durable?', last: 4 });
    expect(source).toContain(`// → { shown: 'You asked: why durable?', last: 4 }`);
    const { rows } = await db.pool.query<{ seq: string }>(
      `SELECT seq FROM gen_durable_streams WHERE name = 'answer' ORDER BY seq`,
    );
    expect(rows.map((r) => Number(r.seq))).toEqual([0, 1, 2, 3, 4]);
  });
});
