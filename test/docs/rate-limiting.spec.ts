import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/rate-limiting.md exactly as the page shows it.
describe('docs/rate-limiting.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    EnrichContactFsm: Type<unknown>;
    looked: string[];
    example(
      engine: EngineService,
    ): Promise<{ looked: string[]; waiting: string[]; refused: string }>;
  }>('rate-limiting.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.EnrichContactFsm], {
      queues: { enrichment: 5 },
      rateLimits: { lookups: { allowed: 3, period: [1, 'hour'] } },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says', async () => {
    expect(await module.example(t.engine)).toEqual({
      looked: ['ada@example.com', 'bob@example.com'],
      waiting: ['busy', 'busy'],
      refused: 'InvalidInputError',
    });
    // A few polls later the heavy head still waits for its tokens, and so does the row behind it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(module.looked).toEqual(['ada@example.com', 'bob@example.com']);
    const { rows } = await db.pool.query(
      `SELECT state->>'email' AS email, attempt FROM gen_durable WHERE status <> 'done' ORDER BY priority`,
    );
    expect(rows).toEqual([
      { email: 'team@example.com', attempt: 0 },
      { email: 'cy@example.com', attempt: 0 },
    ]);
  });
});
