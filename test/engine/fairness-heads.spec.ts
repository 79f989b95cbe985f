import type { PoolClient } from 'pg';

import { done, DurableFsm, InvalidInputError, Step } from '../../lib';
import { CLAIM_FAIR } from '../../lib/sql/claim.sql';
import {
  FAIR_HEADS_DELETE,
  FAIR_HEADS_LOCK_IDLE,
  FAIRNESS_HEADS,
} from '../../lib/sql/fairness.sql';
import { renderStatement, type StatementRunner } from '../../lib/sql/statement';
import { sweepFairHeads } from '../../lib/runtime/fair-heads-sweep';
import { bootEngine, claimRows, type Harness } from '../support/engine-harness';
import { explainRan } from '../support/explain-plan';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The fairness heads (docs/many-tenants.md "Seeing the heads", "Fair claims by key"):
// `fairnessHeads` lists each fair queue's keys in the claim's order with capped counts and the
// row served next; GC deletes the heads whose key has no live row, and a row that enters a key
// while its head is being deleted still finds (re-creates) its head. Queues here have no
// scheduler: claims are driven by hand.

@DurableFsm({ name: 'fh-job', queue: 'fh-none', fairnessKey: (s) => String(s['tenant']) })
class TenantFsm {
  @Step() start() {
    return done({});
  }
}

describe('fairness heads', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [TenantFsm], {
      queues: {},
      reaper: false,
      gc: { interval: 3_600_000, batch: 2, archive: 'off' },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  async function backlog(queue: string, tenant: string, n: number, extra = {}): Promise<string[]> {
    return h.engine.insertAll(
      TenantFsm,
      Array.from({ length: n }, () => ({ state: { tenant }, queue, ...extra })),
    );
  }

  async function heads(queue: string): Promise<string[]> {
    const { rows } = await db.pool.query<{ k: string }>(
      `SELECT fairness_key AS k FROM gen_durable_fair_keys WHERE queue = $1 ORDER BY fairness_key`,
      [queue],
    );
    return rows.map((r) => r.k);
  }

  const runner: StatementRunner = {
    queryResult: (statement, values) =>
      db.pool.query(renderStatement(statement, 'public'), values as unknown[]),
  };

  describe('fairnessHeads', () => {
    it('lists each key in claim order with capped counts and the row served next', async () => {
      const a = await backlog('fh-read', 'A', 12);
      await backlog('fh-read', 'A', 1, { held: true });
      await backlog('fh-read', 'A', 2, { scheduleIn: 3_600_000 });
      const b = await backlog('fh-read', 'B', 3, { fairnessWeight: 2 });
      // Two claims: the first is plain (it reveals the keys), the second fair; 2 rows each.
      await claimRows(h.engine, 'fh-read', 2, 'w1');
      await claimRows(h.engine, 'fh-read', 2, 'w1');

      // Every queue with a head (this file's first), or one.
      const all = await h.engine.fairnessHeads({ cap: 10 });
      expect(all.map((x) => x.queue)).toEqual(['fh-read']);
      const [q] = all;
      expect(q!.keys).toEqual({ count: 2, capped: false });
      const byKey = Object.fromEntries(q!.heads.map((x) => [x.key, x]));
      const executing = await db.pool.query<{ k: string; n: number }>(
        `SELECT fairness_key AS k, count(*)::int AS n FROM gen_durable
          WHERE queue = 'fh-read' AND status = 'executing' GROUP BY 1`,
      );
      const running = Object.fromEntries(executing.rows.map((r) => [r.k, r.n]));
      expect((running['A'] ?? 0) + (running['B'] ?? 0)).toBe(4);
      // A: 15 rows (12 due, 1 held, 2 later) minus its executing ones; counted up to 10.
      expect(byKey['A']!.runnable).toEqual({ count: 10, capped: true });
      expect(byKey['A']!.executing).toEqual({ count: running['A'] ?? 0, capped: false });
      expect(byKey['B']!.runnable).toEqual({ count: 3 - (running['B'] ?? 0), capped: false });
      expect(byKey['B']!.due).toEqual(byKey['B']!.runnable);
      expect(byKey['B']!.next).toMatchObject({ weight: 2, priority: 0 });
      expect(b).toContain(byKey['B']!.next!.id);
      // A's next row is its oldest unclaimed due row.
      const nextA = await db.pool.query<{ id: string }>(
        `SELECT id::text FROM gen_durable WHERE queue = 'fh-read' AND fairness_key = 'A'
            AND status = 'runnable' AND held_at IS NULL AND eligible_at <= now()
          ORDER BY priority, eligible_at LIMIT 1`,
      );
      expect(byKey['A']!.next).toMatchObject({ id: nextA.rows[0]!.id, weight: 1 });
      expect(a).toContain(byKey['A']!.next!.id);
      expect(byKey['A']!.next!.ageMs).toBeGreaterThanOrEqual(0);
      // Claim order: the smallest virtual time first.
      expect(q!.heads.map((x) => x.vtime)).toEqual(
        [...q!.heads.map((x) => x.vtime)].sort((x, y) => x - y),
      );

      const uncapped = await h.engine.fairnessHeads({ queue: 'fh-read' });
      const a2 = uncapped[0]!.heads.find((x) => x.key === 'A')!;
      expect(a2.runnable).toEqual({ count: 15 - (running['A'] ?? 0), capped: false });
      expect(a2.due).toEqual({ count: 12 - (running['A'] ?? 0), capped: false });
      expect(await h.engine.fairnessHeads({ queue: 'fh-read', limit: 1 })).toEqual([
        expect.objectContaining({ heads: [expect.objectContaining({ key: q!.heads[0]!.key })] }),
      ]);
      expect(await h.engine.fairnessHeads({ queue: 'fh-nothing' })).toEqual([]);
    });

    it('refuses bad options by name', async () => {
      for (const [options, path] of [
        [{ limit: 0 }, 'fairnessHeads.limit'],
        [{ cap: 1.5 }, 'fairnessHeads.cap'],
        [{ queue: '' }, 'fairnessHeads.queue'],
        [{ nope: 1 }, 'fairnessHeads.options.nope'],
      ] as const) {
        await expect(h.engine.fairnessHeads(options as never)).rejects.toMatchObject({
          constructor: InvalidInputError,
          path,
        });
      }
    });

    it('is served by indexes: no sequential scan of gen_durable', async () => {
      const client = await db.pool.connect();
      try {
        const { used } = await explainRan(
          client,
          FAIRNESS_HEADS,
          FAIRNESS_HEADS.params({ queue: null, limit: 100, cap: 1000 }),
        );
        expect(used).toEqual(
          expect.arrayContaining(['gen_durable_fair_keys_walk', 'gen_durable_fair_pick']),
        );
        expect(used.filter((u) => u.startsWith('seq:'))).toEqual([]);
        // The sweep's probes: no sequential scan either.
        await client.query('BEGIN');
        const page = await explainRan(
          client,
          FAIR_HEADS_LOCK_IDLE,
          FAIR_HEADS_LOCK_IDLE.params({ after: { queue: '', key: '' }, limit: 100 }),
        );
        expect(page.used.filter((u) => u.startsWith('seq:'))).toEqual([]);
        expect(page.used).toContain('gen_durable_fair_pick');
        const gone = await explainRan(
          client,
          FAIR_HEADS_DELETE,
          FAIR_HEADS_DELETE.params({
            heads: [
              { queue: 'fh-read', key: 'A' },
              { queue: 'fh-read', key: 'B' },
            ],
          }),
        );
        expect(gone.used.filter((u) => u.startsWith('seq:'))).toEqual([]);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
    });
  });

  describe('GC of empty heads', () => {
    it('deletes the heads whose key has no live row, keeps the others', async () => {
      const q = 'fh-gc';
      const [ended] = await backlog(q, 'ended', 1);
      await backlog(q, 'runnable', 1);
      const [running] = await backlog(q, 'running', 1);
      const [parked] = await backlog(q, 'parked', 1);
      const [waiting] = await backlog(q, 'waiting', 1);
      await db.pool.query(`UPDATE gen_durable SET status = 'cancelled' WHERE id = $1`, [ended]);
      await db.pool.query(
        `UPDATE gen_durable SET status = 'executing', locked_by = 'w', lease_expires_at = now() + interval '1 hour'
          WHERE id = $1`,
        [running],
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'awaiting_signal', awaits = '{go}' WHERE id = $1`,
        [parked],
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
        [waiting],
      );
      expect(await heads(q)).toEqual(['ended', 'parked', 'runnable', 'running', 'waiting']);
      h.clear();
      await h.engine.runtime.gc!.sweep();
      expect(await heads(q)).toEqual(['parked', 'runnable', 'running', 'waiting']);
      expect(h.eventsOf('gc:swept')).toEqual([
        expect.objectContaining({ measurements: expect.objectContaining({ heads: 1 }) }),
      ]);
      // Pages of gc.batch (2) heads: each page one transaction of a lock and (with idle heads) a delete.
      expect(
        h.statements.filter((s) => s === 'fair_heads_lock_idle').length,
      ).toBeGreaterThanOrEqual(3);

      // The others' rows end: their heads go on the next sweep.
      await db.pool.query(`UPDATE gen_durable SET status = 'done' WHERE queue = $1 AND id <> $2`, [
        q,
        ended,
      ]);
      await h.engine.runtime.gc!.sweep();
      expect(await heads(q)).toEqual([]);

      // A retry of an ended row brings its head back (the trigger), and the row is claimed.
      await h.engine.retry(ended!);
      expect(await heads(q)).toEqual(['ended']);
      const claimed = await CLAIM_FAIR.run(runner, {
        queue: q,
        limit: 5,
        worker: 'w',
        leaseMs: 60_000,
        gates: [],
      });
      expect(claimed.rows.map((r) => r.id)).toEqual([ended]);
    });

    it('walks every page of a queue with many heads', async () => {
      const q = 'fh-pages';
      const ids = await h.engine.insertAll(
        TenantFsm,
        Array.from({ length: 7 }, (_, i) => ({ state: { tenant: `t${i}` }, queue: q })),
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'cancelled' WHERE id = ANY($1::bigint[])`,
        [ids],
      );
      expect(await sweepFairHeads(h.engine.runtime.sql, 2, () => false)).toBeGreaterThanOrEqual(7);
      expect(await heads(q)).toEqual([]);
    });
  });

  describe('races of the head deletion with a row entering the key (two sessions)', () => {
    const q = 'fh-race';
    let gc: PoolClient;
    let other: PoolClient;

    beforeEach(async () => {
      gc = await db.pool.connect();
      other = await db.pool.connect();
      await db.pool.query(`DELETE FROM gen_durable WHERE queue = $1`, [q]);
      await db.pool.query(`DELETE FROM gen_durable_fair_keys WHERE queue = $1`, [q]);
    });
    afterEach(async () => {
      await gc.query('ROLLBACK').catch(() => undefined);
      await other.query('ROLLBACK').catch(() => undefined);
      gc.release();
      other.release();
    });

    const on = (client: PoolClient): StatementRunner => ({
      queryResult: (statement, values) =>
        client.query(renderStatement(statement, 'public'), values as unknown[]),
    });

    /** A head for `key` in `q` whose only row ended: an idle head. */
    async function idleHead(key: string): Promise<void> {
      const [id] = await backlog(q, key, 1);
      await db.pool.query(`UPDATE gen_durable SET status = 'done' WHERE id = $1`, [id]);
    }

    async function pidOf(client: PoolClient): Promise<number> {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      return rows[0]!.pid;
    }

    /** Resolves once backend `pid` waits for a lock. */
    async function waits(pid: number): Promise<void> {
      for (let i = 0; i < 2_000; i++) {
        const w = await db.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`,
          [pid],
        );
        if (w.rowCount! > 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('the session never waited for a lock');
    }

    const insertText = `INSERT INTO gen_durable (fsm, step, queue, fairness_key) VALUES ('fh-job', 'start', $1, $2) RETURNING id::text`;

    it('an insert whose trigger meets the locked head waits, then creates the head again', async () => {
      await idleHead('k');
      await gc.query('BEGIN');
      const page = await FAIR_HEADS_LOCK_IDLE.run(on(gc), {
        after: { queue: '', key: '' },
        limit: 1000,
      });
      expect(page.idle).toContainEqual({ queue: q, key: 'k' });
      const pid = await pidOf(other);
      await other.query('BEGIN');
      // The insert's trigger takes FOR KEY SHARE on the head, which the sweep holds FOR UPDATE.
      const inserting = other.query<{ id: string }>(insertText, [q, 'k']);
      await waits(pid);
      // The sweep's delete does not see the uncommitted row: it deletes the head, and commits.
      const gone = await FAIR_HEADS_DELETE.run(on(gc), { heads: page.idle });
      expect(gone).toContainEqual({ queue: q, key: 'k' });
      await gc.query('COMMIT');
      // The trigger finds the head deleted and creates it again.
      const { rows } = await inserting;
      await other.query('COMMIT');
      expect(await heads(q)).toEqual(['k']);
      const claimed = await CLAIM_FAIR.run(runner, {
        queue: q,
        limit: 5,
        worker: 'w',
        leaseMs: 60_000,
        gates: [],
      });
      expect(claimed.rows.map((r) => r.id)).toEqual([rows[0]!.id]);
    });

    it('a head an uncommitted insert holds is skipped by the sweep and kept', async () => {
      await idleHead('k');
      await other.query('BEGIN');
      await other.query(insertText, [q, 'k']);
      await gc.query('BEGIN');
      const page = await FAIR_HEADS_LOCK_IDLE.run(on(gc), {
        after: { queue: '', key: '' },
        limit: 1000,
      });
      // SKIP LOCKED: the inserter's FOR KEY SHARE keeps the head out of the candidates.
      expect(page.idle).not.toContainEqual({ queue: q, key: 'k' });
      await gc.query('COMMIT');
      await other.query('COMMIT');
      expect(await heads(q)).toEqual(['k']);
    });

    it('a head a claim holds is skipped by the sweep, and the claim goes on with it', async () => {
      await idleHead('k');
      // The fair claim's lock on its heads (FOR NO KEY UPDATE), held by an open transaction.
      await other.query('BEGIN');
      await other.query(
        `SELECT 1 FROM gen_durable_fair_keys WHERE queue = $1 AND fairness_key = 'k' FOR NO KEY UPDATE`,
        [q],
      );
      await gc.query('BEGIN');
      const page = await FAIR_HEADS_LOCK_IDLE.run(on(gc), {
        after: { queue: '', key: '' },
        limit: 1000,
      });
      expect(page.idle).not.toContainEqual({ queue: q, key: 'k' });
      await gc.query('COMMIT');
      await other.query(`UPDATE gen_durable_fair_keys SET vtime = vtime + 1 WHERE queue = $1`, [q]);
      await other.query('COMMIT');
      expect(await heads(q)).toEqual(['k']);
    });

    it('a row committed between the lock and the delete keeps its head', async () => {
      // The row is executing (live, not runnable) and goes back to runnable: no trigger fires.
      const [id] = await backlog(q, 'k', 1);
      await db.pool.query(`UPDATE gen_durable SET status = 'done' WHERE id = $1`, [id]);
      await gc.query('BEGIN');
      const page = await FAIR_HEADS_LOCK_IDLE.run(on(gc), {
        after: { queue: '', key: '' },
        limit: 1000,
      });
      expect(page.idle).toContainEqual({ queue: q, key: 'k' });
      // Another session brings a row into the key without taking the head's lock (an ended row
      // moved back to executing by hand, as a step of a live row would be), and commits.
      await other.query(
        `UPDATE gen_durable SET status = 'executing', locked_by = 'w', lease_expires_at = now() + interval '1 hour'
          WHERE id = $1`,
        [id],
      );
      // The delete's snapshot is taken after that commit: the live row keeps the head.
      expect(await FAIR_HEADS_DELETE.run(on(gc), { heads: page.idle })).not.toContainEqual({
        queue: q,
        key: 'k',
      });
      await gc.query('COMMIT');
      expect(await heads(q)).toEqual(['k']);
      // Back to runnable with no trigger: the head is there for the claim.
      await db.pool.query(
        `UPDATE gen_durable SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL WHERE id = $1`,
        [id],
      );
      const claimed = await CLAIM_FAIR.run(runner, {
        queue: q,
        limit: 5,
        worker: 'w',
        leaseMs: 60_000,
        gates: [],
      });
      expect(claimed.rows.map((r) => r.id)).toEqual([id]);
    });
  });
});
