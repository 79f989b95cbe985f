import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Prefetch on a fair queue (docs/many-tenants.md "Prefetch on a fair queue"): the claim is fair,
// and so is the buffer. A key with nothing buffered is claimed by the poke of its insert (the
// refills keep a reserve for it) and starts after at most one row of each other buffered key,
// not behind a prefetched backlog of one key. Every step of tenant A blocks until the test
// releases it, one at a time, so each start follows from the releases, never from timing.

interface JobState {
  readonly tenant: string;
}

/** Tenants in start order. */
const starts: string[] = [];
/** Blocked A steps, oldest first; the test releases them one at a time. */
const blocked: (() => void)[] = [];
/** While set, A steps do not block (between tests, and at the end). */
let flowing = false;

@DurableFsm({
  name: 'fair-prefetch-job',
  queue: 'fair-pf',
  fairnessKey: (s) => String(s['tenant']),
})
class FairPrefetchJob {
  @Step() async start(ctx: StepContext<JobState>) {
    starts.push(ctx.state.tenant);
    if (ctx.state.tenant === 'A' && !flowing) {
      await new Promise<void>((resolve) => blocked.push(resolve));
    }
    return done({});
  }
}

@DurableFsm({ name: 'fair-beside-job', queue: 'fair-pf2', fairnessKey: (s) => String(s['tenant']) })
class FairBesideJob {
  @Step() async start(ctx: StepContext<JobState>) {
    starts.push(ctx.state.tenant);
    if (ctx.state.tenant === 'A' && !flowing) {
      await new Promise<void>((resolve) => blocked.push(resolve));
    }
    return done({});
  }
}

@DurableFsm({ name: 'plain-prefetch-job', queue: 'plain-pf' })
class PlainPrefetchJob {
  @Step() async start(ctx: StepContext<JobState>) {
    starts.push(ctx.state.tenant);
    if (ctx.state.tenant === 'A' && !flowing) {
      await new Promise<void>((resolve) => blocked.push(resolve));
    }
    return done({});
  }
}

describe('prefetch on a fair queue', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    // 2 slots, 8 prefetched: a fair queue keeps ceil(8 / 4) = 2 of its 10 rows for pokes.
    h = await bootEngine(db, [FairPrefetchJob, FairBesideJob, PlainPrefetchJob], {
      queues: { 'fair-pf': 2, 'fair-pf2': 2, 'plain-pf': 2 },
      prefetch: 8,
      minDemand: 4,
    });
  });
  afterAll(async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await h.close();
    await db.drop();
  });

  async function executing(queue: string): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE queue = $1 AND status = 'executing'`,
      [queue],
    );
    return rows[0]!.n;
  }

  async function statusOf(id: string): Promise<string> {
    const { rows } = await db.pool.query<{ status: string }>(
      `SELECT status FROM gen_durable WHERE id = $1`,
      [id],
    );
    return rows[0]!.status;
  }

  /** Releases the oldest blocked A step and waits for the start that its slot allows. */
  async function releaseOne(): Promise<void> {
    const before = starts.length;
    blocked.shift()!();
    await eventually(async () => starts.length > before && blocked.length === 2);
  }

  it('a new key runs before the buffered backlog of another key', async () => {
    starts.length = 0;
    await h.engine.insertAll(
      FairPrefetchJob,
      Array.from({ length: 40 }, () => ({ state: { tenant: 'A' } })),
    );
    // The queue is full: 2 A steps blocked, 8 A rows buffered (10 claimed).
    await eventually(async () => blocked.length === 2 && (await executing('fair-pf')) === 10);
    const b = await h.engine.insert(FairPrefetchJob, { state: { tenant: 'B' } });
    // The poke of B's insert is owed a claim; it runs once the reserve is whole, i.e. once
    // two A rows left the buffer (2 releases).
    await releaseOne();
    await releaseOne();
    await eventually(async () => (await statusOf(b)) === 'executing');
    const bufferedA = (await executing('fair-pf')) - 2 - 1;
    expect(bufferedA).toBeGreaterThanOrEqual(6);
    const mark = starts.length;
    while (!starts.slice(mark).includes('B')) await releaseOne();
    // B started after at most one A row of the buffer, ahead of the other buffered A rows.
    const aBeforeB = starts.slice(mark).indexOf('B');
    expect(aBeforeB).toBeLessThanOrEqual(1);
    expect(bufferedA - aBeforeB).toBeGreaterThanOrEqual(5);
  });

  it('a plain queue keeps its buffer in claim order and no reserve', async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM gen_durable WHERE queue = 'fair-pf' AND status IN ('runnable', 'executing')`,
      );
      return rows[0]!.n === 0;
    }, 30_000);
    flowing = false;
    starts.length = 0;
    const backlog = () => Array.from({ length: 20 }, () => ({ state: { tenant: 'A' } }));
    await h.engine.insertAll(PlainPrefetchJob, backlog());
    // All 10 of capacity claimed by the refills (no reserve kept back).
    await eventually(async () => blocked.length === 2 && (await executing('plain-pf')) === 10);
    const b = await h.engine.insert(PlainPrefetchJob, { state: { tenant: 'B' } });
    await h.engine.insertAll(PlainPrefetchJob, backlog());
    await releaseOne();
    await releaseOne();
    const mark = starts.length;
    while (!starts.slice(mark).includes('B')) await releaseOne();
    // B is claimed in (priority, eligible_at) order, behind the 20 older A rows, and starts
    // behind the buffered ones (claim order).
    expect(starts.slice(mark).indexOf('B')).toBeGreaterThanOrEqual(6);
    expect(starts.slice(mark).indexOf('B')).toBeGreaterThanOrEqual(12);
    expect(await statusOf(b)).not.toBe('runnable');
  });

  it('a poke while a refill is in flight claims the reserve beside it', async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM gen_durable WHERE status IN ('runnable', 'executing')`,
      );
      return rows[0]!.n === 0;
    }, 30_000);
    flowing = false;
    starts.length = 0;
    await h.engine.insertAll(
      FairBesideJob,
      Array.from({ length: 40 }, () => ({ state: { tenant: 'A' } })),
    );
    await eventually(async () => blocked.length === 2 && (await executing('fair-pf2')) === 10);
    // Refills (4 rows or more: minDemand) wait on a latch from now on; a poke's claim (at most
    // the reserve, 2) does not.
    const picker = h.engine.runtime.picker;
    const pickBatch = picker.pickBatch.bind(picker);
    let latch!: () => void;
    const latched = new Promise<void>((resolve) => (latch = resolve));
    let held = 0;
    picker.pickBatch = async (queue, limit, worker, floor) => {
      if (queue === 'fair-pf2' && limit >= 4) {
        held++;
        await latched;
      }
      return pickBatch(queue, limit, worker, floor);
    };
    try {
      // Six releases: the buffer is down to 2, demand reaches minDemand, a refill starts and
      // waits on the latch.
      for (let i = 0; i < 6; i++) await releaseOne();
      await eventually(async () => held === 1);
      const b = await h.engine.insert(FairBesideJob, { state: { tenant: 'B' } });
      // B's poke claimed the reserve while the refill is still held.
      await eventually(async () => (await statusOf(b)) === 'executing');
      expect(held).toBe(1);
    } finally {
      picker.pickBatch = pickBatch;
      latch();
    }
    const mark = starts.length;
    while (!starts.slice(mark).includes('B')) await releaseOne();
    expect(starts.slice(mark).indexOf('B')).toBeLessThanOrEqual(2);
  });
});
