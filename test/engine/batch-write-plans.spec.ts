import type { PoolClient } from 'pg';

import { withArrayLiterals } from '../../lib/db/array-literal';
import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';
import { HEARTBEAT, RELEASE_CLAIMS } from '../../lib/sql/lease.sql';
import {
  FANOUT_LOCK_PARENTS,
  FANOUT_PARK_PARENTS,
  FLUSH_DONE,
  FLUSH_PARKS,
  FLUSH_TRANSITIONS,
  FLUSH_TRANSITIONS_RECORDED,
} from '../../lib/sql/outcome.sql';
import { renderStatement, type Statement } from '../../lib/sql/statement';
import { doneWrites } from '../../bench/done-writes';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The guarded batch writes join their unnested entries to their rows by id, guarded by
// lib/sql/held-claim.ts. Their named prepared statements run a generic plan from the sixth
// execution on a connection, planned for ten entries per array. With the guard's status test as
// a plain comparison (selectivity 0.005 without statistics on the cast) the planner expected
// about one row and chose a nested loop that rescanned every entry for every row: 170-280 ms for
// a flush of 400-600 outcomes on an analyzed table, and the same in custom plans of a table
// never analyzed. These run each statement's generic and custom plan on 300 claimed rows of a
// table of 20 000, analyzed and never analyzed, and check that no plan node reads more than
// four times the batch; then the heartbeat's answer (renewed / lost / neither) row by row.

const ROWS = 300;
const WORKER = 'w';

interface PlanNode {
  'Node Type': string;
  'Actual Loops': number;
  'Actual Rows': number;
  Plans?: PlanNode[];
}

interface Claimed {
  id: string;
  claimSeq: string;
  worker: string;
}

/** Every node of a JSON plan. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe.each([
  ['analyzed', true],
  ['never analyzed', false],
] as const)('guarded batch writes on a table %s: plans linear in the batch', (_label, analyzed) => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = await db.pool.connect();
    await client.query(
      `INSERT INTO gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, 20000)`,
    );
    if (analyzed) await client.query('ANALYZE gen_durable');
  });
  // Each test claims the same rows and rolls back: without this their dead versions pile up
  // in the primary key's scans. VACUUM keeps no column statistics: never analyzed stays so.
  beforeEach(() => client.query('VACUUM gen_durable'));
  afterAll(async () => {
    client.release();
    await db.drop();
  });

  /** Claims `n` rows as WORKER on `on` (inside the caller's transaction). */
  async function claim(on: PoolClient, n: number): Promise<Claimed[]> {
    const { rows } = await CLAIM_RUNNABLE.run(
      { queryResult: (s, v) => on.query(renderStatement(s, 'public'), v as unknown[]) },
      { queue: 'default', limit: n, worker: WORKER, leaseMs: 60_000, gates: [] },
    );
    expect(rows).toHaveLength(n);
    return rows;
  }

  /**
   * Claims ROWS rows in a transaction and runs `statement` on them under EXPLAIN ANALYZE twice,
   * each rolled back to a savepoint: its generic plan (what a named prepared statement runs from
   * its sixth execution; `EXPLAIN EXECUTE` of a `PREPARE`d one under `force_generic_plan`) and
   * its custom plan (an unnamed statement, planned for its values). Answers both plans.
   */
  async function bothPlans(
    statement: Statement,
    params: (rows: Claimed[]) => unknown[],
  ): Promise<{ nodes: PlanNode[]; top: PlanNode }[]> {
    type Explained = { 'QUERY PLAN': Array<{ Plan: PlanNode }> };
    await client.query('BEGIN');
    try {
      const rows = await claim(client, ROWS);
      // Array literals (text), numbers and NULLs, as the executor sends them.
      const values = withArrayLiterals(params(rows)) as (string | number | null)[];
      const literals = values
        .map((v) => (v === null ? 'NULL' : `'${String(v).replace(/'/g, "''")}'`))
        .join(', ');
      const text = renderStatement(statement, 'public');
      const plans: Explained[] = [];
      await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
      await client.query(`PREPARE batch_write AS ${text}`);
      await client.query('SAVEPOINT plan');
      plans.push(
        (
          await client.query<Explained>(
            `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE batch_write(${literals})`,
          )
        ).rows[0]!,
      );
      await client.query('ROLLBACK TO SAVEPOINT plan');
      await client.query('DEALLOCATE batch_write');
      plans.push(
        (
          await client.query<Explained>({
            text: `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
            values,
          })
        ).rows[0]!,
      );
      return plans.map((p) => {
        const top = p['QUERY PLAN'][0]!.Plan;
        return { nodes: nodes(top), top };
      });
    } finally {
      await client.query('ROLLBACK');
    }
  }

  /**
   * No node read more than a few rows per entry over all its loops: an index scan of the ids
   * also returns the versions the claim and the test's rolled-back writes left behind, while a
   * rescan per row reads ROWS² (`Actual Rows` is per loop).
   */
  function expectLinear(plan: PlanNode[]): void {
    const work = plan.map((n) => [n['Node Type'], n['Actual Loops'] * n['Actual Rows']] as const);
    const worst = work.reduce((a, b) => (b[1] > a[1] ? b : a));
    expect(worst[1]).toBeLessThanOrEqual(ROWS * 4);
  }

  const guarded = (rows: Claimed[]) =>
    rows.map((r) => ({ worker: r.worker, id: r.id, seq: r.claimSeq }));
  const held = (rows: Claimed[]) => rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq }));

  // Each writes every one of the ROWS claimed rows.
  it.each<[string, Statement, (rows: Claimed[]) => unknown[]]>([
    [
      'FLUSH_TRANSITIONS',
      FLUSH_TRANSITIONS,
      (rows) => FLUSH_TRANSITIONS.params({ solo: true, entries: doneWrites(rows) }),
    ],
    [
      'FLUSH_DONE',
      FLUSH_DONE,
      (rows) => FLUSH_DONE.params({ solo: true, entries: doneWrites(rows) }),
    ],
    [
      'FLUSH_PARKS',
      FLUSH_PARKS,
      (rows) =>
        FLUSH_PARKS.params({
          entries: guarded(rows).map((g) => ({
            ...g,
            nextStep: 'wait',
            stateText: '{}',
            names: ['go'],
            timeoutMs: null,
          })),
        }),
    ],
    [
      'FANOUT_LOCK_PARENTS',
      FANOUT_LOCK_PARENTS,
      (rows) => FANOUT_LOCK_PARENTS.params({ entries: guarded(rows) }),
    ],
    [
      'FANOUT_PARK_PARENTS',
      FANOUT_PARK_PARENTS,
      (rows) =>
        FANOUT_PARK_PARENTS.params({
          entries: guarded(rows).map((g) => ({ ...g, nextStep: 'joined', stateText: '{}' })),
          landed: new Map(rows.map((r) => [r.id, 1])),
        }),
    ],
    [
      'HEARTBEAT',
      HEARTBEAT,
      (rows) => HEARTBEAT.params({ worker: WORKER, rows: held(rows), leaseMs: 60_000 }),
    ],
    [
      'RELEASE_CLAIMS',
      RELEASE_CLAIMS,
      (rows) => RELEASE_CLAIMS.params({ worker: WORKER, rows: held(rows) }),
    ],
  ])('%s', async (_name, statement, params) => {
    const plans = await bothPlans(statement, params);
    for (const { nodes: plan, top } of plans) {
      expect(top['Actual Rows']).toBe(ROWS);
      expectLinear(plan);
    }
  });

  // Its RETURNING answers only the recorded entries' rows, so only the plans are checked.
  it('FLUSH_TRANSITIONS_RECORDED', async () => {
    const plans = await bothPlans(FLUSH_TRANSITIONS_RECORDED, (rows) =>
      FLUSH_TRANSITIONS_RECORDED.params({
        solo: false,
        entries: doneWrites(rows).map((w) => ({ ...w, history: 2, step: 'perform', attempt: 0 })),
      }),
    );
    for (const { nodes: plan } of plans) expectLinear(plan);
  });

  it('HEARTBEAT renews the held claims and names the lost ones, skipping rows locked elsewhere', async () => {
    const other = await db.pool.connect();
    await client.query('BEGIN');
    try {
      const rows = await claim(client, 6);
      await client.query('COMMIT');
      const [kept, released, reclaimed, bumped, locked, cancelling] = rows as [
        Claimed,
        Claimed,
        Claimed,
        Claimed,
        Claimed,
        Claimed,
      ];
      await client.query(
        `UPDATE gen_durable SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL WHERE id = $1`,
        [released.id],
      );
      await client.query(`UPDATE gen_durable SET locked_by = 'someone-else' WHERE id = $1`, [
        reclaimed.id,
      ]);
      await client.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [
        bumped.id,
      ]);
      await client.query(`UPDATE gen_durable SET cancel_requested_at = now() WHERE id = $1`, [
        cancelling.id,
      ]);
      // A row another transaction holds is skipped: neither renewed nor lost.
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM gen_durable WHERE id = $1 FOR UPDATE', [locked.id]);

      const runner = {
        queryResult: (s: Statement, v: readonly unknown[]) =>
          client.query(renderStatement(s, 'public'), withArrayLiterals(v) as unknown[]),
      };
      // A small batch and a large one (ids no row has pad it): the same answer.
      for (const pad of [0, 100]) {
        const held = rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq }));
        // Ids no row has: lost, as a purged row would be.
        for (let k = 0; k < pad; k++) held.push({ id: String(1_000_000 + k), claimSeq: '1' });
        const result = await HEARTBEAT.run(runner, { worker: WORKER, rows: held, leaseMs: 60_000 });
        expect([...result.renewed].sort()).toEqual([kept.id, cancelling.id].sort());
        expect(result.cancelRequested.map((c) => c.id)).toEqual([cancelling.id]);
        expect(result.lost.map((l) => l.id).sort()).toEqual(
          [
            released.id,
            reclaimed.id,
            bumped.id,
            ...held.slice(rows.length).map((h) => h.id),
          ].sort(),
        );
      }
    } finally {
      await other.query('ROLLBACK');
      other.release();
      await client.query('ROLLBACK').catch(() => undefined);
    }
  });
});
