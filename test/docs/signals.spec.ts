import type { Type } from '@nestjs/common';

import type { AwaitResult, EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/signals.md exactly as the page shows it.
describe('docs/signals.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module, source } = loadDocExample<{
    ExpenseApprovalFsm: Type<unknown>;
    example(engine: EngineService): Promise<AwaitResult>;
  }>('signals.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.ExpenseApprovalFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says, with one stored signal', async () => {
    const result = await module.example(t.engine);
    expect(result).toEqual({ kind: 'done', result: { amount: 120, approvedBy: 'dana' } });
    expect(source).toContain(`// → { kind: 'done', result: { amount: 120, approvedBy: 'dana' } }`);
    const { rows } = await db.pool.query<{ dedup_key: string; consumed: boolean }>(
      `SELECT dedup_key, consumed_at IS NOT NULL AS consumed FROM gen_durable_signals`,
    );
    expect(rows).toEqual([{ dedup_key: 'evt_81', consumed: true }]);
  });
});
