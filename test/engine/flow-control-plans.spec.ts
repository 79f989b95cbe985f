import type { PoolClient } from 'pg';

import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';
import { INSERT_INSTANCE } from '../../lib/sql/insert.sql';
import { renderStatement, type Statement } from '../../lib/sql/statement';
import { explainRan } from '../support/explain-plan';
import type { InsertRow } from '../../lib/instance/insert-row';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The flow-control statements keep their indexes (docs/operations-control.md "Hold and
// release", docs/identity.md "Dedup windows"), also as generic plans: the claim with its held
// filter still scans gen_durable_pick and skips held rows; a keyed insert probes dedup windows
// by gen_durable_dedup. Each runs under EXPLAIN ANALYZE in a transaction rolled back.

describe('flow-control plans', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, queue, correlation_key, dedup_until)
       SELECT 'plan', 'start', 'done', 'plan', 'k' || i,
              CASE WHEN i % 10 = 0 THEN now() + interval '1 hour' END
         FROM generate_series(1, 20000) i`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, held_at)
       SELECT 'plan', 'start', 'plan-q', CASE WHEN i <= 5 THEN now() END
         FROM generate_series(1, 50) i`,
    );
    await db.pool.query('ANALYZE gen_durable');
    client = await db.pool.connect();
    await client.query('SET plan_cache_mode = force_generic_plan');
  });
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  /** Index names of plan nodes that ran, and seq scans of gen_durable that ran. */
  async function indexesUsed(statement: Statement, params: unknown[]): Promise<string[]> {
    await client.query('BEGIN');
    try {
      return (await explainRan(client, statement, params)).used;
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it('the claim scans gen_durable_pick and never takes a held row', async () => {
    const input = { queue: 'plan-q', limit: 100, worker: 'w', leaseMs: 1000, gates: [] };
    const used = await indexesUsed(CLAIM_RUNNABLE, CLAIM_RUNNABLE.params(input));
    expect(used).toContain('gen_durable_pick');
    expect(used).not.toContain('seq:gen_durable');
    await client.query('BEGIN');
    try {
      const { rows } = await client.query({
        text: renderStatement(CLAIM_RUNNABLE, 'public'),
        values: CLAIM_RUNNABLE.params(input),
      });
      const batch = CLAIM_RUNNABLE.decode(rows as never[], input);
      expect(batch.rows).toHaveLength(45);
      const { rows: held } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM gen_durable WHERE queue = 'plan-q' AND held_at IS NOT NULL AND status = 'runnable'`,
      );
      expect(held[0]!.n).toBe(5);
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('a keyed insert probes the dedup windows by gen_durable_dedup', async () => {
    const row: InsertRow = {
      fsm: 'plan',
      fsmVersion: 1,
      step: 'start',
      stateText: '{}',
      queue: 'plan',
      priority: 0,
      at: null,
      delayMs: 0,
      correlationKey: 'k20',
      scope: 'runnable,executing,awaiting_signal,awaiting_children',
      concurrencyKey: null,
      rateLimit: null,
      weight: 1,
    };
    const used = await indexesUsed(INSERT_INSTANCE, INSERT_INSTANCE.params(row));
    expect(used).toContain('gen_durable_dedup');
    expect(used).not.toContain('seq:gen_durable');
  });
});
