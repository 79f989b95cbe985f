import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/concurrency.md exactly as the page shows it.
describe('docs/concurrency.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    AccountSyncFsm: Type<unknown>;
    example(
      engine: EngineService,
    ): Promise<{ sameAccount: number | undefined; partner: number | undefined }>;
  }>('concurrency.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.AccountSyncFsm], {
      queues: { sync: 10 },
      concurrencyLimits: { partner: { limit: 2 } },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says: one sync per account at a time, at most 2 partner calls per tenant', async () => {
    const peaks = await module.example(t.engine);
    expect(peaks.sameAccount).toBe(1);
    expect(peaks.partner).toBeGreaterThanOrEqual(1);
    expect(peaks.partner).toBeLessThanOrEqual(2);
  }, 60_000);
});
