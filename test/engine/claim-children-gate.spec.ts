import type { PoolClient } from 'pg';

import { CLAIM_RUNNABLE, type ClaimInput } from '../../lib/sql/claim.sql';
import { renderStatement } from '../../lib/sql/statement';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The claim's children view (lib/sql/claim.sql.ts, `childrenOf`) on a real PostgreSQL: the
// per-row probe of gen_durable_parent runs only when the table holds a child at all. The gate is
// one backward scan of that partial index per statement, never a scan of the table, even on a
// table never analyzed (the planner's default guess for `parent_id IS NOT NULL` is "nearly
// every row"), and a claimed parent still gets its children.

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Parent Relationship'?: string;
  readonly 'Subplan Name'?: string;
  readonly 'Actual Loops'?: number;
  readonly Plans?: readonly PlanNode[];
}

interface Scan {
  readonly type: string;
  readonly index: string | undefined;
  readonly loops: number;
}

describe('the claim probes children only when the table holds one', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = await db.pool.connect();
    // 20 000 rows, never analyzed: 14 000 ended, 6 000 runnable.
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, updated_at)
       SELECT 'f', 'a', 'done', now() - interval '1 hour' FROM generate_series(1, 14000)`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue) SELECT 'f', 'a', 'default' FROM generate_series(1, 6000)`,
    );
  });
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  const input: ClaimInput = {
    queue: 'default',
    limit: 50,
    worker: 'w',
    leaseMs: 30_000,
    gates: [],
  };

  /** Every scan of gen_durable in the executed claim's plan; the claim itself is rolled back. */
  async function claimScans(): Promise<Scan[]> {
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>({
        text: `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${renderStatement(CLAIM_RUNNABLE, 'public')}`,
        values: CLAIM_RUNNABLE.params(input),
      });
      const scans: Scan[] = [];
      const walk = (n: PlanNode): void => {
        // A bitmap probe names the index on its Bitmap Index Scan, the table on its parent.
        if (n['Relation Name'] === 'gen_durable' || n['Index Name'] !== undefined) {
          scans.push({
            type: n['Node Type'],
            index: n['Index Name'],
            loops: n['Actual Loops'] ?? 0,
          });
        }
        for (const c of n.Plans ?? []) walk(c);
      };
      walk(rows[0]!['QUERY PLAN'][0]!.Plan);
      return scans;
    } finally {
      await client.query('ROLLBACK');
    }
  }

  it('without a child anywhere: one look at gen_durable_parent a branch, no per-row probe, no table scan', async () => {
    const scans = await claimScans();
    expect(scans.map((s) => s.type)).not.toContain('Seq Scan');
    const onParent = scans.filter((s) => s.index === 'gen_durable_parent');
    // The gate, once in each branch of the answer's UNION ALL (the claimed rows, the trailer).
    const gates = onParent.filter((s) => s.type === 'Index Only Scan');
    expect(gates.map((g) => g.loops)).toEqual([1, 1]);
    // The per-row probe, in each branch too: never run.
    const probes = onParent.filter((s) => s.type !== 'Index Only Scan');
    expect(probes).toHaveLength(2);
    for (const p of probes) expect(p.loops).toBe(0);
  });

  it('with a child in the table: each claimed row is probed, and a claimed parent gets its children', async () => {
    const { rows: parent } = await db.pool.query<{ id: string }>(
      `SELECT id::text FROM gen_durable WHERE queue = 'default' AND status = 'runnable' ORDER BY id LIMIT 1`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, parent_id, state)
       VALUES ('child', 'a', 'done', $1, '{"n": 7}')`,
      [parent[0]!.id],
    );
    const scans = await claimScans();
    const probes = scans.filter(
      (s) => s.index === 'gen_durable_parent' && s.type !== 'Index Only Scan',
    );
    // The claimed rows' branch probes each of its 50 rows; the trailer, its one row without an id.
    expect(probes.map((p) => p.loops).sort((a, b) => b - a)).toEqual([50, 1]);

    await client.query('BEGIN');
    try {
      const batch = CLAIM_RUNNABLE.decode(
        (
          await client.query({
            text: renderStatement(CLAIM_RUNNABLE, 'public'),
            values: CLAIM_RUNNABLE.params(input),
          })
        ).rows,
        input,
      );
      const claimed = batch.rows.find((r) => r.id === parent[0]!.id);
      expect(claimed?.children).toEqual([
        expect.objectContaining({ fsm: 'child', status: 'done', state: { n: 7 } }),
      ]);
      expect(batch.rows.filter((r) => r.children.length > 0)).toHaveLength(1);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
