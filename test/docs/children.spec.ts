import type { Type } from '@nestjs/common';

import type { AwaitResult, EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/children.md exactly as the page shows it.
describe('docs/children.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    ReserveLineFsm: Type<unknown>;
    OrderFulfilmentFsm: Type<unknown>;
    example(engine: EngineService): Promise<AwaitResult[]>;
  }>('children.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.ReserveLineFsm, module.OrderFulfilmentFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says: the duplicate line reserved once, the short order failed', async () => {
    expect(await module.example(t.engine)).toEqual([
      { kind: 'done', result: { reserved: { pen: 2, ink: 1 } } },
      { kind: 'failed', error: 'no stock for unobtainium' },
    ]);
    const { rows } = await db.pool.query<{ key: string; n: string }>(
      `SELECT p.state->>'orderId' AS key, count(c.id) AS n
         FROM gen_durable p JOIN gen_durable c ON c.parent_id = p.id GROUP BY 1 ORDER BY 1`,
    );
    expect(rows).toEqual([
      { key: 'A-1', n: '2' },
      { key: 'A-2', n: '2' },
    ]);
  });
});
