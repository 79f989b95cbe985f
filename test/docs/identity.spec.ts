import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/identity.md exactly as the page shows it.
describe('docs/identity.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    SubscriptionFsm: Type<unknown>;
    DailyReportFsm: Type<unknown>;
    example(engine: EngineService): Promise<Record<string, unknown>>;
  }>('identity.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.SubscriptionFsm, module.DailyReportFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says', async () => {
    expect(await module.example(t.engine)).toEqual({
      secondWasDuplicate: true,
      renewedIsNew: true,
      reportsInserted: 1,
      lateTimerWasDuplicate: true,
      reportHolder: 'done',
    });
    const { rows } = await db.pool.query<{ fsm: string; finished: boolean }>(
      `SELECT fsm, status IN ('done', 'failed') AS finished FROM gen_durable ORDER BY id`,
    );
    expect(rows).toEqual([
      { fsm: 'subscription', finished: true },
      { fsm: 'subscription', finished: false },
      { fsm: 'daily-report', finished: true },
    ]);
  });
});
