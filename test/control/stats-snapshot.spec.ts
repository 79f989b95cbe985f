import { done, DurableFsm, InvalidInputError, Step } from '../../lib';
import { Client } from 'pg';

import { STATS_BUDGET, STATS_MAX_GAP_MS, StatsSnapshot } from '../../lib/runtime/stats-snapshot';
import { renderStatement } from '../../lib/sql/statement';
import { WRITE_STATS_SNAPSHOT } from '../../lib/sql/stats.sql';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §30: the once-a-minute stats snapshot (one row per queue per minute, written
// once whichever maintenance node gets there first) and the overview read over it.

@DurableFsm({ name: 'stats-job', queue: 'sq' })
class StatsJob {
  @Step() start() {
    return done({});
  }
}

describe('stats snapshot and overview (docs/design.md §30)', () => {
  let db: TestDatabase;
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    // No queue runs: rows stay where the test puts them. The snapshot is taken by hand.
    const opts = { queues: {}, reaper: false as const, gc: false as const, poke: 'none' as const };
    a = await bootEngine(db, [StatsJob], { ...opts, name: 'a' });
    b = await bootEngine(db, [StatsJob], { ...opts, name: 'b' });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });
  afterEach(async () => {
    await db.pool.query('DELETE FROM gen_durable_stats');
    await db.pool.query('DELETE FROM gen_durable');
  });

  function snapshotOf(h: Harness, now?: () => number, cap = 3): StatsSnapshot {
    return new StatsSnapshot(
      h.engine.runtime.sql,
      { interval: 60_000, retention: 86_400_000, cap },
      h.engine.runtime.telemetry,
      now,
    );
  }

  /** A clock that answers `readings` one per call, in order. */
  function clockOf(...readings: number[]): () => number {
    return () => {
      const t = readings.shift();
      if (t === undefined) throw new Error('the test clock ran out of readings');
      return t;
    };
  }

  const statsRows = async (): Promise<number> =>
    (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM gen_durable_stats'))
      .rows[0]!.n;

  /**
   * Seeds rows relative to the database clock's minute; waits out the last seconds of a minute
   * first, so the snapshot taken right after counts the same minute the rows were placed in.
   */
  async function seed(): Promise<void> {
    const { rows } = await db.pool.query<{ s: number }>(
      `SELECT extract(second FROM now())::float8 AS s`,
    );
    const second = rows[0]?.s ?? 0;
    if (second > 55) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, queue, priority, eligible_at, updated_at, lease_expires_at)
       VALUES ('stats-job', 'start', 'runnable', 'sq', 0, now() - interval '5 minutes', now(), NULL),
              ('stats-job', 'start', 'runnable', 'sq', 1, now() - interval '9 minutes', now(), NULL),
              ('stats-job', 'start', 'runnable', 'sq', 0, now() + interval '1 hour', now(), NULL),
              ('stats-job', 'start', 'executing', 'sq', 0, now(), now(), now() + interval '1 minute'),
              ('stats-job', 'start', 'awaiting_signal', 'other', 0, now(), now(), NULL),
              ('stats-job', 'start', 'awaiting_children', 'other', 0, now(), now(), NULL),
              ('stats-job', 'start', 'done', 'sq', 0, now(), date_trunc('minute', now()) - interval '20 seconds', NULL),
              ('stats-job', 'start', 'failed', 'sq', 0, now(), date_trunc('minute', now()) - interval '30 seconds', NULL),
              ('stats-job', 'start', 'done', 'sq', 0, now(), date_trunc('minute', now()) - interval '2 minutes', NULL)`,
    );
  }

  it('with no snapshot the overview counts live (runnable, scheduled, executing)', async () => {
    await seed();
    const overview = await a.engine.stats();
    expect(overview.source).toBe('live');
    const sq = overview.queues.find((q) => q.queue === 'sq');
    expect(sq?.counts).toMatchObject({
      runnable: { count: 3, capped: false },
      scheduled: { count: 1, capped: false },
      executing: { count: 1, capped: false },
      awaitingSignal: null,
      done: null,
    });
  });

  it('writes one row per queue for the minute, counts capped, oldest due row', async () => {
    await seed();
    const events = a.events.length;
    expect((await snapshotOf(a).take()).sort()).toEqual(['other', 'sq']);
    expect(a.events.slice(events).filter((e) => e.event === 'stats:snapshot')).toMatchObject([
      { measurements: { queues: 2 } },
    ]);
    const { rows } = await db.pool.query<{
      at: Date;
      queue: string;
      counts: Record<string, unknown>;
      oldest: Date | null;
      minute: Date;
      nine: Date;
    }>(
      `SELECT s.at, s.queue, s.counts, s.oldest_runnable_at AS oldest, date_trunc('minute', now()) AS minute,
              (SELECT eligible_at FROM gen_durable WHERE priority = 1) AS nine
         FROM gen_durable_stats s ORDER BY queue`,
    );
    expect(rows.map((r) => r.queue)).toEqual(['other', 'sq']);
    expect(rows[0]?.at).toEqual(rows[0]?.minute);
    expect(rows[1]?.counts).toEqual({
      runnable: 3,
      scheduled: 1,
      executing: 1,
      awaiting_signal: 0,
      awaiting_children: 0,
      done: 1,
      failed: 1,
      cancelled: 0,
      capped: ['runnable'],
    });
    expect(rows[1]?.oldest).toEqual(rows[1]?.nine);
    expect(rows[0]?.counts).toMatchObject({ awaiting_signal: 1, awaiting_children: 1 });
    expect(rows[0]?.oldest).toBeNull();
  });

  it('after a slow write, this node takes no snapshot for that write × STATS_BUDGET', async () => {
    await seed();
    // The write reads 0 → 3 000 ms: the next is due at 3 000 + 3 000 × 100 = 303 000 ms.
    const snapshot = snapshotOf(a, clockOf(0, 3_000, 302_999, 303_000, 303_010, 304_010, 304_020));
    const events = a.events.length;
    expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
    expect(a.events.slice(events).filter((e) => e.event === 'stats:snapshot')).toMatchObject([
      { measurements: { queues: 2, durationMs: 3_000 } },
    ]);
    // The minute is gone: a take that ran its statement would write it again.
    await db.pool.query('DELETE FROM gen_durable_stats');
    expect(await snapshot.take()).toEqual([]);
    expect(await statsRows()).toBe(0);
    // Due again: it writes, in 10 ms this time, so the next is due 1 000 ms after.
    expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
    expect(await statsRows()).toBe(2);
    await db.pool.query('DELETE FROM gen_durable_stats');
    expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
    expect(STATS_BUDGET).toBe(100);
  });

  it('the gap after a very slow write is at most STATS_MAX_GAP_MS', async () => {
    await seed();
    const slow = STATS_MAX_GAP_MS; // × STATS_BUDGET would be 100 hours
    const snapshot = snapshotOf(a, clockOf(0, slow, 2 * slow - 1, 2 * slow, 2 * slow + 5));
    expect(await snapshot.take()).toHaveLength(2);
    await db.pool.query('DELETE FROM gen_durable_stats');
    expect(await snapshot.take()).toEqual([]);
    expect(await snapshot.take()).toHaveLength(2);
  });

  it('a write that fails after a while is paced like one that succeeded', async () => {
    await seed();
    // A real failure from Postgres: the table the write inserts into is gone for one attempt.
    await db.pool.query('ALTER TABLE gen_durable_stats RENAME TO gen_durable_stats_away');
    // The failing attempt reads 0 → 3 000 ms: the next is due at 303 000 ms, as after a write.
    const snapshot = snapshotOf(a, clockOf(0, 3_000, 302_999, 303_000, 303_010));
    try {
      expect(await snapshot.take()).toEqual([]);
    } finally {
      await db.pool.query('ALTER TABLE gen_durable_stats_away RENAME TO gen_durable_stats');
    }
    // The table is back, but the attempt is not due: no statement runs, no row is written.
    expect(await snapshot.take()).toEqual([]);
    expect(await statsRows()).toBe(0);
    expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
    // A failure that came fast (10 ms here) holds the node back only 1 s: the next tick retries.
    await db.pool.query('DELETE FROM gen_durable_stats');
    await db.pool.query('ALTER TABLE gen_durable_stats RENAME TO gen_durable_stats_away');
    const quick = snapshotOf(a, clockOf(0, 10, 60_000, 60_020));
    try {
      expect(await quick.take()).toEqual([]);
    } finally {
      await db.pool.query('ALTER TABLE gen_durable_stats_away RENAME TO gen_durable_stats');
    }
    expect((await quick.take()).sort()).toEqual(['other', 'sq']);
  });

  it('a prune that fails after a written minute leaves the write reported and paced once', async () => {
    await seed();
    await db.pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts)
       VALUES (date_trunc('minute', now()) - interval '2 days', 'sq', '{}')`,
    );
    // A real failure from Postgres: a trigger refuses the prune's DELETE.
    await db.pool.query(`CREATE FUNCTION refuse_stats_delete() RETURNS trigger LANGUAGE plpgsql
      AS $$ BEGIN RAISE EXCEPTION 'no delete from gen_durable_stats'; END $$`);
    await db.pool.query(`CREATE TRIGGER refuse_stats_delete BEFORE DELETE ON gen_durable_stats
      FOR EACH ROW EXECUTE FUNCTION refuse_stats_delete()`);
    // The write reads 0 → 3 000 ms; the failed prune reads no clock: next due at 303 000 ms.
    const snapshot = snapshotOf(a, clockOf(0, 3_000, 302_999, 303_000, 303_010));
    const events = a.events.length;
    try {
      expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
      expect(a.events.slice(events).filter((e) => e.event === 'stats:snapshot')).toMatchObject([
        { measurements: { queues: 2, durationMs: 3_000 } },
      ]);
      // The expired row is still there: the prune failed, the minute's rows were kept.
      expect(await statsRows()).toBe(3);
    } finally {
      await db.pool.query('DROP TRIGGER refuse_stats_delete ON gen_durable_stats');
      await db.pool.query('DROP FUNCTION refuse_stats_delete()');
    }
    await db.pool.query('DELETE FROM gen_durable_stats');
    expect(await snapshot.take()).toEqual([]);
    expect(await statsRows()).toBe(0);
    expect((await snapshot.take()).sort()).toEqual(['other', 'sq']);
  });

  it('counts each lane from its earliest live row: under a pin one walk of the dead entries, not three', async () => {
    // Two lanes of queue sq: priority 0 with 1 500 rows claimed away (dead entries at its head
    // that the pin keeps) and 500 due + 20 scheduled left; priority 5 with 7 due.
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, priority, eligible_at)
       SELECT 'stats-job', 'start', 'sq', 0, now() - interval '1 hour' + i * interval '1 ms'
         FROM generate_series(1, 2000) i
       UNION ALL
       SELECT 'stats-job', 'start', 'sq', 0, now() + interval '1 hour' FROM generate_series(1, 20)
       UNION ALL
       SELECT 'stats-job', 'start', 'sq', 5, now() - interval '1 minute' FROM generate_series(1, 7)`,
    );
    const pin = new Client({ connectionString: db.url });
    await pin.connect();
    try {
      await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await pin.query('SELECT txid_current()');
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', updated_at = now() - interval '1 hour'
          WHERE id IN (SELECT id FROM gen_durable WHERE priority = 0 ORDER BY eligible_at LIMIT 1500)`,
      );
      const { rows } = await db.pool.query<{ 'QUERY PLAN': string }>({
        text: `EXPLAIN (ANALYZE, COSTS OFF) ${renderStatement(WRITE_STATS_SNAPSHOT, 'public')}`,
        values: WRITE_STATS_SNAPSHOT.params({ cap: 10_000 }),
      });
      // Heap fetches per index-only scan: one per entry read, dead or alive (the pin keeps the
      // visibility map unset). Only the lanes' first probe may read the 1 500 dead entries.
      const fetches = rows
        .map((r) => /Heap Fetches: (\d+)/.exec(r['QUERY PLAN'])?.[1])
        .filter((n): n is string => n !== undefined)
        .map(Number);
      expect(fetches.filter((n) => n >= 1500)).toHaveLength(1);
      // The parked counts read gen_durable_parked (v19), not the table.
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/gen_durable_parked/);
      expect(plan).not.toMatch(/Seq Scan on gen_durable /);
      await db.pool.query('DELETE FROM gen_durable_stats');
      expect(await snapshotOf(a, undefined, 10_000).take()).toEqual(['sq']);
      const { rows: counts } = await db.pool.query<{ counts: Record<string, unknown> }>(
        `SELECT counts FROM gen_durable_stats WHERE queue = 'sq'`,
      );
      expect(counts[0]?.counts).toMatchObject({ runnable: 527, scheduled: 20, capped: [] });
      // The cap holds for the sum of the lanes: 500 + 20 + 7 rows counted against a cap of 510.
      await db.pool.query('DELETE FROM gen_durable_stats');
      expect(await snapshotOf(a, undefined, 510).take()).toEqual(['sq']);
      const { rows: cappedCounts } = await db.pool.query<{ counts: Record<string, unknown> }>(
        `SELECT counts FROM gen_durable_stats WHERE queue = 'sq'`,
      );
      expect(cappedCounts[0]?.counts).toMatchObject({
        runnable: 510,
        scheduled: 20,
        capped: ['runnable'],
      });
    } finally {
      await pin.query('ROLLBACK');
      await pin.end();
    }
  });

  it('two engines writing the same minute never double it', async () => {
    await seed();
    const [x, y] = await Promise.all([snapshotOf(a).take(), snapshotOf(b).take()]);
    expect([...x, ...y].sort()).toEqual(['other', 'sq']);
    expect(await snapshotOf(b).take()).toEqual([]);
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM gen_durable_stats',
    );
    expect(rows[0]?.n).toBe(2);
  });

  it('the overview reads the newest snapshot and a zero-filled per-minute series', async () => {
    await seed();
    await snapshotOf(a).take();
    // Two earlier minutes, as if written then (the sparkline reads rows ended per minute).
    await db.pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts)
       VALUES (date_trunc('minute', now()) - interval '2 minutes', 'sq', '{"done": 7, "failed": 2}'),
              (date_trunc('minute', now()) - interval '3 hours', 'sq', '{"done": 99}')`,
    );
    const overview = await b.engine.stats({ minutes: 5 });
    expect(overview).toMatchObject({ source: 'snapshot', stale: false, minutes: 5 });
    const sq = overview.queues.find((q) => q.queue === 'sq');
    expect(sq?.counts.runnable).toEqual({ count: 3, capped: true });
    expect(sq?.counts.done).toEqual({ count: 1, capped: false });
    expect(sq?.series.map((p) => [p.done, p.failed])).toEqual([
      [0, 0],
      [0, 0],
      [7, 2],
      [0, 0],
      [1, 1],
    ]);
    expect(sq?.series[4]?.at.getTime()).toBe(overview.at.getTime() - 60_000);
    await expect(b.engine.stats({ minutes: 0 })).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('prunes rows past the retention once it writes a minute', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts)
       VALUES (date_trunc('minute', now()) - interval '2 days', 'sq', '{}')`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, queue) VALUES ('stats-job', 'start', 'runnable', 'sq')`,
    );
    await snapshotOf(a).take();
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable_stats WHERE at < now() - interval '1 day'`,
    );
    expect(rows[0]?.n).toBe(0);
  });
});
