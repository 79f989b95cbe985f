import type { PoolClient } from 'pg';

import {
  type BehindFloor,
  CLAIM_RUNNABLE,
  type ClaimBatch,
  type ClaimInput,
  PROBE_BEHIND_FLOOR,
} from '../../lib/sql/claim.sql';
import {
  CLAIM_FLOOR_SLACK_MS,
  ClaimFloor,
  FLOOR_NEAR_SLACK_MS,
  FLOOR_WIDE_EVERY_MS,
  PIN_SCAN_MS,
  PIN_XIDS,
} from '../../lib/runtime/claim-floor';
import { RELEASE_CLAIMS } from '../../lib/sql/lease.sql';
import { renderStatement } from '../../lib/sql/statement';
import { explainBuffers } from '../support/explain-plan';
import { pinHorizon, unpinHorizon } from '../support/rows';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The claim floor on a real PostgreSQL (docs/design.md §5.3.1). Under a pinned xmin horizon the
// pick index keeps an entry for every row that left `runnable`, and a claim that scans from the
// head visits each one's heap tuple; a claim that starts at the floor its previous claim
// learned does not. Rows that become runnable behind the floor are found by the floor's look
// behind itself (PROBE_BEHIND_FLOOR), and a release answers where it put its rows back.
// Each claim runs in a transaction the test rolls back unless it says otherwise.

describe('the claim floor', () => {
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

  const base = { limit: 10, worker: 'w', leaseMs: 30_000, gates: [] };

  interface PlanNode {
    readonly 'Node Type': string;
    readonly 'Relation Name'?: string;
    readonly 'Index Name'?: string;
    readonly Plans?: readonly PlanNode[];
  }

  async function claim(input: ClaimInput, keep = false): Promise<ClaimBatch> {
    await client.query('BEGIN');
    try {
      const { rows } = await client.query({
        text: renderStatement(CLAIM_RUNNABLE, 'public'),
        values: CLAIM_RUNNABLE.params(input),
      });
      return CLAIM_RUNNABLE.decode(rows as never[], input);
    } finally {
      await client.query(keep ? 'COMMIT' : 'ROLLBACK');
    }
  }

  /**
   * Queue `queue` with 20 000 rows that left runnable under a pin (their old versions held alive
   * by an open transaction that took an XID, a forgotten BEGIN after a write) and `live` runnable
   * rows a minute old behind them, `live` of them 1 ms apart. Returns the pin, to release.
   */
  async function pinnedBacklog(queue: string, live: number): Promise<PoolClient> {
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at)
       SELECT 'f', 'a', $1, now() - interval '1 hour' + i * interval '1 ms'
         FROM generate_series(1, 20000) i`,
      [queue],
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at)
       SELECT 'f', 'a', $1, now() - interval '1 minute' + i * interval '1 ms'
         FROM generate_series(1, $2::int) i`,
      [queue, live],
    );
    const pin = await pinHorizon(db.pool);
    try {
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done' WHERE queue = $1 AND eligible_at < now() - interval '30 minutes'`,
        [queue],
      );
    } catch (err) {
      await unpinHorizon(pin);
      throw err;
    }
    return pin;
  }

  /** Shared buffers (hit + read) the claim touched, from EXPLAIN (ANALYZE, BUFFERS), rolled back. */
  const buffers = (input: ClaimInput): Promise<number> =>
    explainBuffers(client, CLAIM_RUNNABLE, input);

  it('answers the claimed rows in pick order, then one trailer with the pause, the head and the time', async () => {
    const queue = 'answer';
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, priority, eligible_at)
       SELECT 'f', 'a', $1, (i % 3)::smallint, now() - interval '1 minute' + (i % 7) * interval '1 ms'
         FROM generate_series(1, 30) i`,
      [queue],
    );
    const input = { ...base, queue, limit: 20 };
    await client.query('BEGIN');
    try {
      const { rows } = await client.query<{
        id: string | null;
        priority: number | null;
        paused: boolean;
        head_priority: number | null;
        db_now: number | null;
        exec_ms: string | null;
      }>({ text: renderStatement(CLAIM_RUNNABLE, 'public'), values: CLAIM_RUNNABLE.params(input) });
      expect(rows).toHaveLength(21);
      const trailer = rows[20]!;
      // The head is read in the statement's snapshot, where the rows it claims are still runnable.
      expect(trailer).toMatchObject({ id: null, paused: false, head_priority: 0 });
      expect(Number(trailer.exec_ms)).toBeGreaterThan(0);
      expect(trailer.db_now).toEqual(expect.any(Number));
      for (const r of rows.slice(0, 20)) {
        expect(r).toMatchObject({
          head_priority: null,
          db_now: null,
          exec_ms: null,
          paused: false,
        });
      }
      // Pick order: every priority-0 row (10) and priority-1 row (10), in that order.
      expect(rows.slice(0, 20).map((r) => r.priority)).toEqual([
        ...Array<number>(10).fill(0),
        ...Array<number>(10).fill(1),
      ]);
      const decoded = CLAIM_RUNNABLE.decode(rows as never[], input);
      expect(decoded.rows.map((r) => r.id)).toEqual(rows.slice(0, 20).map((r) => r.id));
      expect(decoded.head?.priority).toBe(0);
      expect(decoded.execMs).toBe(Number(trailer.exec_ms));
    } finally {
      await client.query('ROLLBACK');
    }
  });

  it('under a pinned horizon, a claim from the floor skips the entries a full scan visits', async () => {
    const queue = 'pinned';
    const pin = await pinnedBacklog(queue, 5);
    try {
      const full = await claim({ ...base, queue });
      expect(full.rows).toHaveLength(5);
      expect(full.head).toBeDefined();
      const head = full.head!;
      const from = {
        priority: head.priority,
        scanFrom: new Date(head.at.getTime() - 250),
        headFrom: head.at,
      };
      const bounded = await claim({ ...base, queue, from });
      expect(bounded.rows.map((r) => r.id)).toEqual(full.rows.map((r) => r.id));
      expect(bounded.head).toEqual(head);

      const fullBuffers = await buffers({ ...base, queue });
      const boundedBuffers = await buffers({ ...base, queue, from });
      // The full scan visits the heap pages of 20 000 dead-but-pinned versions; the bounded
      // one only those of the five live rows.
      expect(fullBuffers).toBeGreaterThan(100);
      expect(boundedBuffers * 5).toBeLessThan(fullBuffers);
    } finally {
      await unpinHorizon(pin);
    }
  });

  it('a claim sees a pin by an open transaction that took an id, and one full scan under it engages the floor', async () => {
    const queue = 'seen';
    const pin = await pinnedBacklog(queue, 1);
    try {
      // PIN_XIDS write transactions after the pin's: each commits and takes an id of its own.
      await db.pool.query(
        `DO $$ BEGIN FOR i IN 1..${PIN_XIDS} LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`,
      );
      const full = await claim({ ...base, queue });
      expect(full.rows).toHaveLength(1);
      // The snapshot's xmin is at most the pin's id; xmax is past the update's and the loop's.
      expect(full.pinXids).toBeGreaterThanOrEqual(PIN_XIDS + 1);
      // The scan visited the heap of 20 000 dead-but-pinned versions.
      expect(full.execMs).toBeGreaterThanOrEqual(PIN_SCAN_MS);
      const floor = new ClaimFloor();
      floor.learn(full.head, full.dbNow!, true, full.execMs!, Date.now(), full.pinXids);
      expect(floor.engaged).toBe(true);
      expect(floor.start()).toMatchObject({ headFrom: full.head!.at });
    } finally {
      await unpinHorizon(pin);
    }
  });

  it('a claim asked to look sees a REPEATABLE READ reader’s snapshot, a pin with no id of its own', async () => {
    const queue = 'reader';
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at) VALUES ('f', 'a', $1, now() - interval '1 minute')`,
      [queue],
    );
    // A reader holds one snapshot and never takes an id: it is not in any claim's snapshot.
    const reader = await db.pool.connect();
    try {
      await reader.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await reader.query('SELECT count(*) FROM gen_durable');
      await db.pool.query(
        `DO $$ BEGIN FOR i IN 1..${PIN_XIDS} LOOP PERFORM txid_current(); COMMIT; END LOOP; END $$`,
      );
      const looked = await claim({ ...base, queue, horizonCheckMs: 0 });
      expect(looked.rows).toHaveLength(1);
      expect(looked.horizonXids).toBeGreaterThanOrEqual(PIN_XIDS);
      // A role that is not a superuser, with the engine's table rights only, sees it too:
      // pg_stat_get_activity shows every session's backend_xmin to any role.
      const role = `gd_claimer_${process.pid}_${Date.now()}`;
      await db.pool.query(`CREATE ROLE ${role} NOLOGIN`);
      try {
        await db.pool.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
        await db.pool.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
        await db.pool.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
        const input = { ...base, queue, horizonCheckMs: 0 };
        await client.query('BEGIN');
        try {
          await client.query(`SET LOCAL ROLE ${role}`);
          const { rows } = await client.query({
            text: renderStatement(CLAIM_RUNNABLE, 'public'),
            values: CLAIM_RUNNABLE.params(input),
          });
          const asRole = CLAIM_RUNNABLE.decode(rows as never[], input);
          expect(asRole.rows).toHaveLength(1);
          expect(asRole.horizonXids).toBeGreaterThanOrEqual(PIN_XIDS);
        } finally {
          await client.query('ROLLBACK');
        }
      } finally {
        await db.pool.query(`DROP OWNED BY ${role}`);
        await db.pool.query(`DROP ROLE ${role}`);
      }
      // Not asked, or asked only past a time the claim did not reach: it does not look.
      expect((await claim({ ...base, queue })).horizonXids).toBeUndefined();
      expect((await claim({ ...base, queue, horizonCheckMs: 60_000 })).horizonXids).toBeUndefined();
      const floor = new ClaimFloor();
      floor.learn(
        looked.head,
        looked.dbNow!,
        true,
        Math.max(looked.execMs!, PIN_SCAN_MS),
        Date.now(),
        looked.pinXids,
        looked.horizonXids,
      );
      expect(floor.engaged).toBe(true);
      // Every look behind the floor reads the holders again: the reader still holds.
      const input = { queue, before: { priority: 0, at: new Date() } };
      const lookNow = async () =>
        PROBE_BEHIND_FLOOR.decode(
          (
            await client.query({
              text: renderStatement(PROBE_BEHIND_FLOOR, 'public'),
              values: PROBE_BEHIND_FLOOR.params(input),
            })
          ).rows as never[],
          input,
        );
      // (Not asserted: what the look answers once the reader is gone. The holders are read
      // cluster-wide through every snapshot's xmin, and another test file's open transaction
      // can be as old; the unit tests check what the floor does with either answer.)
      expect((await lookNow()).horizonXids).toBeGreaterThanOrEqual(PIN_XIDS);
    } finally {
      await reader.query('ROLLBACK');
      reader.release();
    }
  });

  it('with a large backlog, full and bounded claims read the pick index, never the table', async () => {
    // A regression once made (commit 5563e99): a full scan's candidates started at the head
    // probe's answer (an InitPlan), which the planner could not use as an index bound; with a
    // backlog of 600 000 rows it sorted a sequential scan of the table instead (7 s a claim in
    // the PostgreSQL 18 soak).
    const queue = 'backlog';
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at)
       SELECT 'f', 'a', $1, now() - interval '1 hour' + i * interval '1 ms'
         FROM generate_series(1, 200000) i`,
      [queue],
    );
    await db.pool.query('ANALYZE gen_durable');
    const scans = async (input: ClaimInput): Promise<string[]> => {
      await client.query('BEGIN');
      try {
        const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>({
          text: `EXPLAIN (FORMAT JSON) ${renderStatement(CLAIM_RUNNABLE, 'public')}`,
          values: CLAIM_RUNNABLE.params(input),
        });
        const out: string[] = [];
        const walk = (n: PlanNode): void => {
          if (n['Relation Name'] === 'gen_durable') {
            out.push(`${n['Node Type']} ${n['Index Name'] ?? ''}`.trim());
          }
          for (const c of n.Plans ?? []) walk(c);
        };
        walk(rows[0]!['QUERY PLAN'][0]!.Plan);
        return out;
      } finally {
        await client.query('ROLLBACK');
      }
    };
    const full = await scans({ ...base, queue });
    expect(full.filter((s) => s.startsWith('Seq Scan'))).toEqual([]);
    expect(full).toContain('Index Scan gen_durable_pick');
    const at = new Date(Date.now() - 1_800_000);
    const bounded = await scans({
      ...base,
      queue,
      from: { priority: 0, scanFrom: new Date(at.getTime() - 250), headFrom: at },
    });
    expect(bounded.filter((s) => s.startsWith('Seq Scan'))).toEqual([]);
    await db.pool.query(`DELETE FROM gen_durable WHERE queue = $1`, [queue]);
  });

  it('a row made runnable behind the floor is found by the look behind it, and claimed from there', async () => {
    const queue = 'behind';
    await db.pool.query(`INSERT INTO gen_durable (fsm, step, queue) VALUES ('f', 'a', $1)`, [
      queue,
    ]);
    const first = await claim({ ...base, queue }, true);
    expect(first.rows).toHaveLength(1);
    const head = first.head!;
    const startAt = (at: Date): ClaimInput['from'] => ({
      priority: head.priority,
      scanFrom: new Date(at.getTime() - 250),
      headFrom: at,
    });
    const look = async (): Promise<BehindFloor> => {
      const input = {
        queue,
        before: { priority: head.priority, at: new Date(head.at.getTime() - 250) },
      };
      const { rows } = await client.query({
        text: renderStatement(PROBE_BEHIND_FLOOR, 'public'),
        values: PROBE_BEHIND_FLOOR.params(input),
      });
      return PROBE_BEHIND_FLOOR.decode(rows as never[], input);
    };
    // Nothing behind the floor yet: one answer row, no place.
    expect((await look()).head).toBeUndefined();
    // A row whose place is an hour before the floor (a reaped row keeps its place; so does an
    // unheld one, or an insert with a past runAt).
    const {
      rows: [late],
    } = await db.pool.query<{ id: string; eligible_at: Date }>(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at)
       VALUES ('f', 'a', $1, now() - interval '1 hour') RETURNING id::text, eligible_at`,
      [queue],
    );
    const bounded = await claim({ ...base, queue, from: startAt(head.at) });
    expect(bounded.rows).toEqual([]);
    // …and it does not appear as the head either: the floor stays where it was found.
    expect(bounded.head).toBeUndefined();
    // The look behind finds it, locked by another claim or not (it takes no lock)…
    const other = await db.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE', [late!.id]);
      expect((await look()).head).toEqual({ priority: 0, at: late!.eligible_at });
    } finally {
      await other.query('ROLLBACK');
      other.release();
    }
    // …and a claim from that place takes it.
    const again = await claim({ ...base, queue, from: startAt(late!.eligible_at) });
    expect(again.rows.map((r) => r.id)).toEqual([late!.id]);
  });

  it('a row that committed up to CLAIM_FLOOR_SLACK_MS behind the floor: a near claim passes it, the next wide claim takes it', async () => {
    const queue = 'lagging';
    await db.pool.query(`INSERT INTO gen_durable (fsm, step, queue) VALUES ('f', 'a', $1)`, [
      queue,
    ]);
    const t0 = 5_000_000;
    const floor = new ClaimFloor();
    // Engaged by a pin its claim saw; the first claim from it learns the head.
    floor.start(t0);
    const first = await claim({ ...base, queue }, true);
    floor.learn(first.head, first.dbNow!, true, PIN_SCAN_MS, t0, PIN_XIDS);
    expect(floor.engaged).toBe(true);
    const at = floor.start(t0 + 1)!.headFrom;
    // A writer whose commit lagged its now() by more than the near slack, less than the slack.
    const lag = (FLOOR_NEAR_SLACK_MS + CLAIM_FLOOR_SLACK_MS) / 2;
    const {
      rows: [late],
    } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at) VALUES ('f', 'a', $1, $2)
       RETURNING id::text`,
      [queue, new Date(at.getTime() - lag)],
    );
    // The claims right after the wide one at t0 + 1 are near: they pass it.
    const near = floor.start(t0 + 2)!;
    expect(at.getTime() - near.scanFrom.getTime()).toBe(FLOOR_NEAR_SLACK_MS);
    expect((await claim({ ...base, queue, from: near })).rows).toEqual([]);
    // The first claim FLOOR_WIDE_EVERY_MS after the last wide one reaches it.
    const wide = floor.start(t0 + 1 + FLOOR_WIDE_EVERY_MS)!;
    expect((await claim({ ...base, queue, from: wide })).rows.map((r) => r.id)).toEqual([late!.id]);
  });

  it('a release answers the earliest place it put back, the floor’s way back to it', async () => {
    const queue = 'released';
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, priority, eligible_at)
       VALUES ('f', 'a', $1, 1, now() - interval '2 minutes'), ('f', 'a', $1, 1, now() - interval '3 minutes'),
              ('f', 'a', $1, 2, now() - interval '9 minutes')`,
      [queue],
    );
    const taken = await claim({ ...base, queue }, true);
    expect(taken.rows).toHaveLength(3);
    const input = {
      worker: 'w',
      rows: taken.rows.map((r) => ({ id: r.id, claimSeq: r.claimSeq })),
    };
    const answer = await client.query({
      text: renderStatement(RELEASE_CLAIMS, 'public'),
      values: RELEASE_CLAIMS.params(input),
    });
    const released = RELEASE_CLAIMS.decode(answer.rows as never[], input);
    expect(released.ids.sort()).toEqual(taken.rows.map((r) => r.id).sort());
    const { rows } = await db.pool.query<{ at: Date }>(
      `SELECT min(eligible_at) AS at FROM gen_durable WHERE queue = $1 AND priority = 1`,
      [queue],
    );
    expect(released.earliest).toEqual({ priority: 1, at: rows[0]!.at });
  });

  it('the head is the oldest runnable row: a row another claim holds counts, a held row does not, a future one is capped at now', async () => {
    const queue = 'head';
    const {
      rows: [held, locked, next],
    } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at, held_at)
       VALUES ('f', 'a', $1, now() - interval '3 minutes', now()),
              ('f', 'a', $1, now() - interval '2 minutes', NULL),
              ('f', 'a', $1, now() - interval '1 minute', NULL)
       RETURNING id::text`,
      [queue],
    );
    const other = await db.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE', [locked!.id]);
      const seen = await claim({ ...base, queue });
      // The locked row is skipped by the candidates but still holds the floor.
      expect(seen.rows.map((r) => r.id)).toEqual([next!.id]);
      const { rows } = await db.pool.query<{ eligible_at: Date }>(
        'SELECT eligible_at FROM gen_durable WHERE id = $1',
        [locked!.id],
      );
      expect(seen.head).toEqual({ priority: 0, at: rows[0]!.eligible_at });
      expect(held).toBeDefined();
    } finally {
      await other.query('ROLLBACK');
      other.release();
    }

    const future = 'future';
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, priority, eligible_at) VALUES ('f', 'a', $1, 3, now() + interval '1 hour')`,
      [future],
    );
    const ahead = await claim({ ...base, queue: future });
    expect(ahead.rows).toEqual([]);
    expect(ahead.head).toEqual({ priority: 3, at: ahead.dbNow });
  });
});
