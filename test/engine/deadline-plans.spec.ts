import type { PoolClient } from 'pg';

import { DUE_INSTANCE_DEADLINES, ROUTE_DEADLINE } from '../../lib/sql/deadline.sql';
import type { Statement } from '../../lib/sql/statement';
import { explainRan } from '../support/explain-plan';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The instance-deadline statements keep their indexes (docs/operations-control.md "Instance
// deadlines"), also as generic plans: the sweep's scan reads gen_durable_deadline (partial: only
// live rows with a deadline), never the table; the move is a primary-key lookup. Each runs
// under EXPLAIN ANALYZE in a transaction rolled back.

describe('instance-deadline plans', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Many ended rows that kept their deadline, a few live ones past it, many live ones ahead.
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, queue, deadline_at)
       SELECT 'plan', 'start', CASE WHEN i <= 10000 THEN 'done' ELSE 'runnable' END::gen_durable_status, 'plan',
              CASE WHEN i <= 10000 OR i % 500 = 0 THEN now() - interval '1 minute'
                   WHEN i % 2 = 0 THEN now() + interval '1 hour' END
         FROM generate_series(1, 20000) i`,
    );
    await db.pool.query('ANALYZE gen_durable');
    client = await db.pool.connect();
    await client.query('SET plan_cache_mode = force_generic_plan');
  });
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  /** Index names of plan nodes that ran, seq scans of gen_durable that ran, and the rows. */
  async function run(
    statement: Statement,
    params: unknown[],
  ): Promise<{ used: string[]; rows: number }> {
    await client.query('BEGIN');
    try {
      return await explainRan(client, statement, params);
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it('the sweep scans gen_durable_deadline and finds only the live rows past their deadline', async () => {
    const input = { fsms: ['plan'], limit: 1000 };
    const { used, rows } = await run(DUE_INSTANCE_DEADLINES, DUE_INSTANCE_DEADLINES.params(input));
    expect(used).toEqual(['gen_durable_deadline']);
    expect(rows).toBe(20);
  });

  it('a later page of the sweep (its keyset cursor) scans gen_durable_deadline too', async () => {
    const { rows: cursor } = await db.pool.query<{ key: string; id: string }>(
      `SELECT deadline_at::text AS key, id FROM gen_durable
        WHERE status = 'runnable' AND deadline_at < now() ORDER BY deadline_at, id LIMIT 1 OFFSET 4`,
    );
    const input = {
      fsms: ['plan'],
      limit: 1000,
      after: { deadlineKey: cursor[0]!.key, id: cursor[0]!.id },
    };
    const { used, rows } = await run(DUE_INSTANCE_DEADLINES, DUE_INSTANCE_DEADLINES.params(input));
    expect(used).toEqual(['gen_durable_deadline']);
    expect(rows).toBe(15);
  });

  it('the move to onDeadline locks its row by primary key', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE status = 'runnable' AND deadline_at < now() LIMIT 1`,
    );
    const input = { id: rows[0]!.id, step: 'expired', graceMs: 0, record: true };
    const { used } = await run(ROUTE_DEADLINE, ROUTE_DEADLINE.params(input));
    expect(used).toContain('gen_durable_pkey');
    expect(used).not.toContain('seq:gen_durable');
  });
});
