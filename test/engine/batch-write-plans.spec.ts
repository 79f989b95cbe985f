import type { PoolClient } from 'pg';

import { withArrayLiterals } from '../../lib/db/array-literal';
import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';
import { HEARTBEAT, RELEASE_CLAIMS } from '../../lib/sql/lease.sql';
import { FLUSH_PARKS, FLUSH_TRANSITIONS } from '../../lib/sql/outcome.sql';
import { renderStatement, type Statement } from '../../lib/sql/statement';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// lib/sql/held-claim.ts (entryRow, heldClaim): the guarded batch writes reach each entry's row
// by one primary-key probe. A named prepared statement runs a generic plan from its sixth
// execution on, planned for ten entries; joined by `g.id = t.id` beside `g.id = ANY (ids)`, that
// plan was a nested loop rescanning every entry for every row (O(n²): 280 ms for 600 outcomes).
// These run each statement's generic plan on 300 claimed rows of an analyzed table and check
// that no plan node reads more than twice the entries, and that every row was written.

const ROWS = 300;

interface PlanNode {
  'Node Type': string;
  'Actual Loops': number;
  'Actual Rows': number;
  Plans?: PlanNode[];
}

/** Every node of a JSON plan, with its loops. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe('guarded batch writes: one probe per entry in a generic plan', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = await db.pool.connect();
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, 20000)`,
    );
    await client.query('ANALYZE gen_durable');
  });
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  /**
   * Claims ROWS rows in a transaction, runs `statement`'s generic plan on them under
   * EXPLAIN ANALYZE, rolls back; answers the plan's nodes and the rows the statement returned.
   */
  async function genericPlan(
    statement: Statement,
    params: (rows: Array<{ id: string; claimSeq: string; worker: string }>) => unknown[],
  ): Promise<{ nodes: PlanNode[]; top: PlanNode }> {
    await client.query('BEGIN');
    try {
      const { rows } = await CLAIM_RUNNABLE.run(
        {
          queryResult: (s, v) => client.query(renderStatement(s, 'public'), v as unknown[]),
        },
        { queue: 'default', limit: ROWS, worker: 'w', leaseMs: 60_000, gates: [] },
      );
      expect(rows).toHaveLength(ROWS);
      await client.query(`SET LOCAL plan_cache_mode = force_generic_plan`);
      await client.query(`PREPARE batch_write AS ${renderStatement(statement, 'public')}`);
      const args = (withArrayLiterals(params(rows)) as unknown[])
        .map((v) => (v === null ? 'NULL' : `'${String(v).replace(/'/g, "''")}'`))
        .join(', ');
      const { rows: plan } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE batch_write(${args})`,
      );
      const top = plan[0]!['QUERY PLAN'][0]!.Plan;
      return { nodes: nodes(top), top };
    } finally {
      await client.query('ROLLBACK');
      // PREPARE outlives the transaction.
      await client.query('DEALLOCATE ALL');
    }
  }

  /** No node of the plan ran more than once per entry (a rescan per row would run ROWS² times). */
  function expectLinear(plan: PlanNode[]): void {
    // `Actual Rows` is per loop: a node rescanned for every row reads ROWS × ROWS.
    const work = plan.map((n) => [n['Node Type'], n['Actual Loops'] * n['Actual Rows']] as const);
    const worst = work.reduce((a, b) => (b[1] > a[1] ? b : a));
    expect(worst[1]).toBeLessThanOrEqual(ROWS * 2);
  }

  it('FLUSH_TRANSITIONS', async () => {
    const { nodes: plan, top } = await genericPlan(FLUSH_TRANSITIONS, (rows) =>
      FLUSH_TRANSITIONS.params({
        solo: true,
        entries: rows.map((r) => ({
          worker: r.worker,
          id: r.id,
          seq: r.claimSeq,
          kind: 'done' as const,
          nextStep: null,
          stateText: null,
          resultText: '{}',
          error: null,
          delayMs: 0,
          rateLimit: null,
          weight: 1,
          setKey: false,
          concurrencyKey: null,
        })),
      }),
    );
    expect(top['Actual Rows']).toBe(ROWS);
    expectLinear(plan);
  });

  it('FLUSH_PARKS', async () => {
    const { nodes: plan, top } = await genericPlan(FLUSH_PARKS, (rows) =>
      FLUSH_PARKS.params({
        entries: rows.map((r) => ({
          worker: r.worker,
          id: r.id,
          seq: r.claimSeq,
          nextStep: 'wait',
          stateText: '{}',
          names: ['go'],
          timeoutMs: null,
        })),
      }),
    );
    expect(top['Actual Rows']).toBe(ROWS);
    expectLinear(plan);
  });

  it('HEARTBEAT', async () => {
    const { nodes: plan, top } = await genericPlan(HEARTBEAT, (rows) =>
      HEARTBEAT.params({
        worker: 'w',
        rows: rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq })),
        leaseMs: 60_000,
      }),
    );
    expect(top['Actual Rows']).toBe(ROWS);
    expectLinear(plan);
  });

  it('RELEASE_CLAIMS', async () => {
    const { nodes: plan, top } = await genericPlan(RELEASE_CLAIMS, (rows) =>
      RELEASE_CLAIMS.params({
        worker: 'w',
        rows: rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq })),
      }),
    );
    expect(top['Actual Rows']).toBe(ROWS);
    expectLinear(plan);
  });
});
