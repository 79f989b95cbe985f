import type { PoolClient } from 'pg';

import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import type { Scheduler } from '../../lib/runtime/scheduler';

type PickBatch = (
  queue: string,
  limit: number,
  worker: string,
) => Promise<{ rows: readonly unknown[]; paused: boolean }>;
import { bootEngine, eventually, type Harness, rowOf, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §5.1–5.2, §6.2, §17.4, §26.1: `concurrency` bounds running steps, not rows
// whose outcome awaits its commit. A row whose step returned frees its slot; it stays held
// (heartbeated, waited for by the drain, never run twice) until its flush answers; once running
// steps and rows awaiting commit reach `2 × concurrency + prefetch` the scheduler stops
// dispatching and claiming. The slow flush is real: a second session holds the row lock the flush's UPDATE
// needs, so the flush statement waits inside PostgreSQL.

/** Step starts per `id:step`. */
const starts = new Map<string, number>();
const started = (key: string): void => {
  starts.set(key, (starts.get(key) ?? 0) + 1);
};

/** Released together by the test; steps started while it is closed wait on it. */
let gate: { promise: Promise<void>; open: () => void } = closedGate();
function closedGate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

interface SlotState {
  readonly hold?: boolean;
}

@DurableFsm({ name: 'slot-job', queue: 'slots' })
class SlotJob {
  async perform(args: SlotState, ctx: StepContext<SlotState>): Promise<undefined> {
    started(`${ctx.id}:perform`);
    if (args.hold) await gate.promise;
    return undefined;
  }
}

@DurableFsm({ name: 'slot-chain', queue: 'slots' })
class SlotChain {
  @Step() start(ctx: StepContext) {
    started(`${ctx.id}:start`);
    return next('b', ctx.state);
  }
  @Step() b(ctx: StepContext) {
    started(`${ctx.id}:b`);
    return next('c', ctx.state);
  }
  @Step() c(ctx: StepContext) {
    started(`${ctx.id}:c`);
    return done({});
  }
}

interface SlowState {
  readonly ms: number;
}

@DurableFsm({ name: 'slot-slow', queue: 'slots' })
class SlotSlow {
  async perform(args: SlowState, ctx: StepContext<SlowState>): Promise<undefined> {
    started(`${ctx.id}:perform`);
    await sleep(args.ms);
    return undefined;
  }
}

describe('running slots and rows awaiting commit', () => {
  let db: TestDatabase;
  let h: Harness | undefined;
  let blocker: PoolClient | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });
  beforeEach(() => {
    starts.clear();
    gate = closedGate();
  });
  afterEach(async () => {
    gate.open();
    if (blocker) {
      await blocker.query('ROLLBACK').catch(() => undefined);
      blocker.release();
      blocker = undefined;
    }
    await h?.close();
    h = undefined;
  });

  const schedulerOf = (harness: Harness): Scheduler => {
    const s = harness.engine.runtime.schedulers.get('slots');
    if (!s) throw new Error('no scheduler for queue slots');
    return s;
  };

  async function boot(concurrency: number, extra: Record<string, unknown> = {}): Promise<Harness> {
    h = await bootEngine(db, [SlotJob, SlotChain, SlotSlow], {
      name: `Slots${concurrency}`,
      queues: { slots: concurrency },
      prefetch: 0,
      poke: 'local',
      reaper: false,
      gc: false,
      ...extra,
    });
    return h;
  }

  /**
   * Runs one held row, takes its row lock in a second session, lets its step return: its
   * flush then waits on the lock inside PostgreSQL. Resolves with the row's id once the
   * scheduler counts it as awaiting commit and the flush statement is seen waiting on a lock.
   */
  async function slowFlushOfOne(harness: Harness): Promise<string> {
    const scheduler = schedulerOf(harness);
    const id = await harness.engine.insert(SlotJob, { state: { hold: true } });
    await eventually(async () => starts.get(`${id}:perform`) === 1);
    blocker = await db.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query('SELECT id FROM gen_durable WHERE id = $1 FOR UPDATE', [id]);
    gate.open();
    gate = closedGate();
    await eventually(async () => scheduler.awaitingCommitCount === 1);
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return rows[0]?.n === 1;
    });
    return id;
  }

  async function unblock(): Promise<void> {
    await blocker?.query('ROLLBACK');
    blocker?.release();
    blocker = undefined;
  }

  it('a 50-slot scheduler with one slow flush keeps 50 steps running', async () => {
    const harness = await boot(50);
    const scheduler = schedulerOf(harness);
    const slow = await slowFlushOfOne(harness);
    expect(scheduler.inFlightCount).toBe(0);

    const ids = await harness.engine.insertAll(
      SlotJob,
      Array.from({ length: 50 }, () => ({ state: { hold: true } })),
    );
    // The slow row's flush has not answered, yet all 50 slots run steps.
    await eventually(async () => ids.every((id) => starts.get(`${id}:perform`) === 1));
    expect(scheduler.inFlightCount).toBe(50);
    expect(scheduler.awaitingCommitCount).toBe(1);
    expect((await rowOf(db, slow))['status']).toBe('executing');

    await unblock();
    gate.open();
    for (const id of [slow, ...ids]) {
      expect((await harness.engine.await(id, { timeout: 20_000 })).kind).toBe('done');
    }
    for (const id of [slow, ...ids]) expect(starts.get(`${id}:perform`)).toBe(1);
  });

  it('a stuck flusher stops dispatch and claims at the bound (2 × concurrency + prefetch rows awaiting commit)', async () => {
    const harness = await boot(5, { prefetch: 2 });
    const scheduler = schedulerOf(harness);
    expect(scheduler.maxAwaitingCommit).toBe(12);
    const slow = await slowFlushOfOne(harness);

    const ids = await harness.engine.insertAll(
      SlotJob,
      Array.from({ length: 30 }, () => ({ state: {} })),
    );
    // Steps return at once; their outcomes queue behind the stuck flush until the bound.
    await eventually(async () => scheduler.awaitingCommitCount === 12);
    const waiting = ids.filter((id) => starts.get(`${id}:perform`) === 1);
    expect(waiting).toHaveLength(11);
    // The rows awaiting commit are heartbeated (their leases move on while they wait).
    const before = (await rowOf(db, waiting[0]!))['lease_expires_at'] as Date;
    await eventually(
      async () =>
        ((await rowOf(db, waiting[0]!))['lease_expires_at'] as Date).getTime() > before.getTime(),
    );
    // Several polls later (FAST: every 50–200 ms) nothing more ran and nothing more was held.
    await sleep(600);
    expect(ids.filter((id) => starts.has(`${id}:perform`))).toHaveLength(11);
    expect(scheduler.inFlightCount).toBe(0);
    expect(scheduler.awaitingCommitCount).toBe(12);
    expect(scheduler.bufferedCount).toBeLessThanOrEqual(7);
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE status = 'executing'`,
    );
    expect(rows[0]?.n).toBe(scheduler.awaitingCommitCount + scheduler.bufferedCount);
    // Memory stays bounded: 3 × concurrency + 2 × prefetch rows at most.
    expect(rows[0]?.n).toBeLessThanOrEqual(3 * 5 + 2 * 2);

    await unblock();
    for (const id of [slow, ...ids]) {
      expect((await harness.engine.await(id, { timeout: 20_000 })).kind).toBe('done');
    }
    for (const id of [slow, ...ids]) expect(starts.get(`${id}:perform`)).toBe(1);
  });

  it('the shutdown drain waits for rows awaiting commit, and they commit', async () => {
    const harness = await boot(2, { drainTimeout: 30_000 });
    const scheduler = schedulerOf(harness);
    const slow = await slowFlushOfOne(harness);

    let drained = false;
    const draining = scheduler.drain().then(() => {
      drained = true;
    });
    const event = await harness.waitFor('scheduler:drain');
    expect(event.measurements).toEqual({ released: 0, inFlight: 1 });
    await sleep(300);
    expect(drained).toBe(false);
    expect((await rowOf(db, slow))['status']).toBe('executing');

    await unblock();
    await draining;
    expect(drained).toBe(true);
    expect((await rowOf(db, slow))['status']).toBe('done');
    expect(starts.get(`${slow}:perform`)).toBe(1);
  });

  it('no id runs a step twice while rows re-claimed after their commit wait for their held twin', async () => {
    const harness = await boot(50, { prefetch: 50 });
    const ids = await harness.engine.insertAll(
      SlotChain,
      Array.from({ length: 300 }, () => ({ state: {} })),
    );
    for (const id of ids) {
      expect((await harness.engine.await(id, { timeout: 30_000 })).kind).toBe('done');
    }
    expect(starts.size).toBe(900);
    for (const [key, n] of starts) expect([key, n]).toEqual([key, 1]);
    const scheduler = schedulerOf(harness);
    await eventually(
      async () => scheduler.inFlightCount === 0 && scheduler.awaitingCommitCount === 0,
    );
  });

  describe("prefetch and minDemand 'auto' (the defaults)", () => {
    /** The demand of every pick that claimed rows, after the first one. */
    function demands(harness: Harness): number[] {
      return harness
        .eventsOf('pick:stop')
        .filter((e) => (e.measurements['count'] ?? 0) > 0)
        .slice(1)
        .map((e) => e.measurements['demand']!);
    }

    it('the bound on rows awaiting commit is sized for the largest capacity (the average step is test/unit/prefetch-policy.spec.ts)', async () => {
      const harness = await boot(10, { prefetch: 'auto', minDemand: 'auto' });
      const scheduler = schedulerOf(harness);
      expect(scheduler.prefetch()).toBe(0);
      expect(scheduler.maxAwaitingCommit).toBe(2 * 10 + 790);
    });

    it('a queue of short steps prefetches up to max(800, 4 × concurrency) rows', async () => {
      const harness = await boot(10, { prefetch: 'auto', minDemand: 'auto' });
      const scheduler = schedulerOf(harness);
      expect(scheduler.prefetch()).toBe(0);
      const ids = await harness.engine.insertAll(
        SlotJob,
        Array.from({ length: 400 }, () => ({ state: {} })),
      );
      for (const id of ids) {
        expect((await harness.engine.await(id, { timeout: 30_000 })).kind).toBe('done');
      }
      // Steps of well under 50 ms: picks asked for more than the 10 slots, running +
      // prefetched up to max(800, 40) rows.
      expect(Math.max(...demands(harness))).toBeGreaterThan(10);
      expect(Math.max(...demands(harness))).toBeLessThanOrEqual(800);
      for (const id of ids) expect(starts.get(`${id}:perform`)).toBe(1);
    });

    it('the next claim starts while half the prefetched rows are still buffered', async () => {
      // A slow poll, so every claim here is a refill (a poll tick claims whenever minDemand is met).
      const harness = await boot(10, { prefetch: 'auto', minDemand: 'auto', pollInterval: 5_000 });
      const scheduler = schedulerOf(harness);
      // Steps of 3–5 ms (a 3 ms timer): short, not trivial, so the capacity is max(200, 40).
      const warm = await harness.engine.insertAll(
        SlotSlow,
        Array.from({ length: 20 }, () => ({ state: { ms: 3 } })),
      );
      for (const id of warm) await harness.engine.await(id, { timeout: 20_000 });
      expect(scheduler.prefetch()).toBe(190);
      // Rows buffered when each claim is sent (the picker is the scheduler's own).
      const bufferedAtClaim: number[] = [];
      const picker = (scheduler as unknown as { picker: { pickBatch: PickBatch } }).picker;
      const pickBatch = picker.pickBatch.bind(picker);
      picker.pickBatch = (queue, limit, worker) => {
        bufferedAtClaim.push(scheduler.bufferedCount);
        return pickBatch(queue, limit, worker);
      };
      // 10 slots run the 200 rows of a claim in ~60–100 ms, longer than a claim.
      const ids = await harness.engine.insertAll(
        SlotSlow,
        Array.from({ length: 1000 }, () => ({ state: { ms: 3 } })),
      );
      for (const id of ids) {
        expect((await harness.engine.await(id, { timeout: 60_000 })).kind).toBe('done');
      }
      // With a refill only on an empty buffer every claim would be sent with 0 rows buffered.
      // (with 200-row claims, about half are sent with 80–90 rows buffered).
      expect(bufferedAtClaim.filter((n) => n >= 50).length).toBeGreaterThanOrEqual(5);
      // Never more than the capacity held: running + buffered ≤ 200 after each claim.
      expect(Math.max(...demands(harness))).toBeLessThanOrEqual(200);
      for (const id of ids) expect(starts.get(`${id}:perform`)).toBe(1);
    });

    it('a queue of long steps does not prefetch: no row waits hidden behind them', async () => {
      const harness = await boot(2, { prefetch: 'auto', minDemand: 'auto' });
      const scheduler = schedulerOf(harness);
      const ids = await harness.engine.insertAll(
        SlotSlow,
        Array.from({ length: 8 }, () => ({ state: { ms: 120 } })),
      );
      for (const id of ids) {
        expect((await harness.engine.await(id, { timeout: 30_000 })).kind).toBe('done');
      }
      expect(scheduler.prefetch()).toBe(0);
      // Never more claimed than the free slots.
      expect(Math.max(...demands(harness))).toBeLessThanOrEqual(2);
    });

    it('rows prefetched while steps were short are released once steps turn long, and another node runs them', async () => {
      const harness = await boot(2, { prefetch: 'auto', minDemand: 'auto' });
      const scheduler = schedulerOf(harness);
      // Short steps first: the average drops under 50 ms and the queue prefetches.
      const warm = await harness.engine.insertAll(
        SlotJob,
        Array.from({ length: 20 }, () => ({ state: {} })),
      );
      for (const id of warm) await harness.engine.await(id, { timeout: 20_000 });
      expect(scheduler.prefetch()).toBeGreaterThan(0);

      // A burst of long (held) steps: one pick claims them all, 2 run, the rest are buffered.
      const held = await harness.engine.insertAll(
        SlotJob,
        Array.from({ length: 12 }, () => ({ state: { hold: true } })),
      );
      await eventually(async () => scheduler.inFlightCount === 2);
      await eventually(async () => scheduler.bufferedCount === 10);
      // The two held steps return after 200 ms: the average crosses 50 ms, prefetch is 0, and
      // once both slots run again the 8 rows still buffered go back to runnable.
      await sleep(200);
      gate.open();
      gate = closedGate();
      const shed = await harness.waitFor('scheduler:shed');
      expect(shed.measurements).toEqual({ released: 8 });
      expect(scheduler.prefetch()).toBe(0);
      expect(scheduler.bufferedCount).toBe(0);
      // The first two commit (their flushes may still be in flight when the shed runs).
      const shape = async () =>
        (
          await db.pool.query<{ status: string; locked: boolean; n: number }>(
            `SELECT status::text AS status, locked_by IS NOT NULL AS locked, count(*)::int AS n
               FROM gen_durable WHERE id = ANY($1::bigint[]) GROUP BY 1, 2 ORDER BY 1, 2`,
            [held],
          )
        ).rows;
      await eventually(async () => (await shape()).some((r) => r.status === 'done' && r.n === 2));
      expect(await shape()).toEqual([
        { status: 'done', locked: false, n: 2 },
        { status: 'executing', locked: true, n: 2 },
        { status: 'runnable', locked: false, n: 8 },
      ]);

      // A second node with free slots takes the released rows at once.
      const other = await bootEngine(db, [SlotJob, SlotChain, SlotSlow], {
        name: 'SlotsOther',
        queues: { slots: 8 },
        prefetch: 0,
        poke: 'local',
        reaper: false,
        gc: false,
      });
      try {
        const otherScheduler = other.engine.runtime.schedulers.get('slots')!;
        await eventually(async () => otherScheduler.inFlightCount === 8);
        gate.open();
        for (const id of held) {
          expect((await harness.engine.await(id, { timeout: 20_000 })).kind).toBe('done');
        }
        for (const id of held) expect(starts.get(`${id}:perform`)).toBe(1);
      } finally {
        await other.close();
      }
    });
  });
});
