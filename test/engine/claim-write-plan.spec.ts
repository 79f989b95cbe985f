import type { PoolClient } from 'pg';

import { CLAIM_RUNNABLE, type ClaimInput } from '../../lib/sql/claim.sql';
import { renderStatement } from '../../lib/sql/statement';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The claim's write of its rows (lib/sql/claim.sql.ts, `claimKept`) on a real PostgreSQL: a
// claim of the size `prefetch: 'auto'` takes for trivial steps (700 rows) from a 20 000-row
// table updates its rows by TID scan. Joined by ctid alone, the planner hashed a
// sequential scan of the whole table for that write: O(table) per claim
// (docs/performance.md "The claim's write by TID").

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly Plans?: readonly PlanNode[];
}

describe('the claim writes its rows by TID', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = await db.pool.connect();
  });
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  it('a claim of 700 from a 20 000-row table, 6 000 of them runnable, reads no table sequentially', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, updated_at)
       SELECT 'f', 'a', 'done', now() - interval '1 hour' FROM generate_series(1, 14000)`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue) SELECT 'f', 'a', 'default' FROM generate_series(1, 6000)`,
    );
    await db.pool.query('ANALYZE gen_durable');
    const input: ClaimInput = {
      queue: 'default',
      limit: 700,
      worker: 'w',
      leaseMs: 30_000,
      gates: [],
    };
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>({
        text: `EXPLAIN (FORMAT JSON) ${renderStatement(CLAIM_RUNNABLE, 'public')}`,
        values: CLAIM_RUNNABLE.params(input),
      });
      const scans: string[] = [];
      const walk = (n: PlanNode): void => {
        if (n['Relation Name'] === 'gen_durable') scans.push(n['Node Type']);
        for (const c of n.Plans ?? []) walk(c);
      };
      walk(rows[0]!['QUERY PLAN'][0]!.Plan);
      expect(scans).not.toContain('Seq Scan');
      expect(scans).toContain('Tid Scan');
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
