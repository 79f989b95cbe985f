import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/cron.md exactly as the page shows it.
describe('docs/cron.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    NightlyReportFsm: Type<unknown>;
    example(engine: EngineService): Promise<{ at: Date; fired: number; reports: string[] }>;
  }>('cron.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.NightlyReportFsm], { queues: {}, reaper: false, gc: false });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says', async () => {
    const { at, fired, reports } = await module.example(t.engine);
    expect(fired).toBe(1);
    expect(reports).toEqual([`pdf for ${at.toISOString()}`]);
    // 03:00 in Berlin: 01:00Z in summer, 02:00Z in winter.
    expect(at.toISOString()).toMatch(/T0[12]:00:00\.000Z$/);
  });
});
