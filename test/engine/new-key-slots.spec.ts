import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// A slot for new keys (docs/many-tenants.md "A slot for new keys"): on a fair queue that
// prefetches, `newKeySlots` running slots are kept for rows whose fairness key has no step
// running. Tenant A's steps block until the test releases them, so A can never free a slot by
// itself: B starts at once only if a slot was kept free for it.

interface JobState {
  readonly tenant: string;
}

/** Tenants in start order. */
const starts: string[] = [];
/** Blocked A steps, oldest first. */
const blocked: (() => void)[] = [];
let flowing = false;

async function step(ctx: StepContext<JobState>) {
  starts.push(ctx.state.tenant);
  if (ctx.state.tenant === 'A' && !flowing) {
    await new Promise<void>((resolve) => blocked.push(resolve));
  }
  return done({});
}

@DurableFsm({ name: 'new-key-job', queue: 'nk-fair', fairnessKey: (s) => String(s['tenant']) })
class NewKeyJob {
  @Step() async start(ctx: StepContext<JobState>) {
    return step(ctx);
  }
}

@DurableFsm({ name: 'new-key-plain-job', queue: 'nk-plain' })
class PlainJob {
  @Step() async start(ctx: StepContext<JobState>) {
    return step(ctx);
  }
}

describe('slots kept for new keys', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    // 3 slots, 1 kept for new keys: A, however large its backlog, runs at most 2 steps.
    h = await bootEngine(db, [NewKeyJob, PlainJob], {
      queues: { 'nk-fair': 3, 'nk-plain': 3 },
      prefetch: 8,
      minDemand: 4,
      newKeySlots: 1,
    });
  });
  afterAll(async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await h.close();
    await db.drop();
  });

  async function statusOf(id: string): Promise<string> {
    const { rows } = await db.pool.query<{ status: string }>(
      `SELECT status FROM gen_durable WHERE id = $1`,
      [id],
    );
    return rows[0]!.status;
  }

  async function runnable(queue: string): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE queue = $1 AND status = 'runnable'`,
      [queue],
    );
    return rows[0]!.n;
  }

  async function live(queue: string): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE queue = $1 AND status IN ('runnable', 'executing')`,
      [queue],
    );
    return rows[0]!.n;
  }

  /** Releases the oldest blocked A step and waits for the A row that takes its slot. */
  async function releaseA(): Promise<void> {
    const before = starts.filter((t) => t === 'A').length;
    blocked.shift()!();
    await eventually(
      async () => starts.filter((t) => t === 'A').length > before && blocked.length === 2,
    );
  }

  it("a busy key's rows leave the kept slot free; a new key's row takes it at once", async () => {
    await h.engine.insertAll(
      NewKeyJob,
      Array.from({ length: 30 }, () => ({ state: { tenant: 'A' } })),
    );
    // A fills the two slots it may use and the buffer; the third slot stays free.
    await eventually(async () => blocked.length === 2 && (await runnable('nk-fair')) < 30);
    const scheduler = h.engine.runtime.schedulers.get('nk-fair')!;
    expect(scheduler.inFlightCount).toBe(2);
    expect(scheduler.bufferedCount).toBeGreaterThan(0);

    // The idle queue's first claim took the poke reserve too (2 of its 11 rows): B's poke is
    // owed a claim until two A rows leave the buffer. Each release lets the next A row into
    // the slot it freed, never into the kept one.
    const b = await h.engine.insert(NewKeyJob, { state: { tenant: 'B' } });
    await releaseA();
    await releaseA();
    // B ran in the kept slot while A's two steps stay blocked.
    await eventually(async () => (await statusOf(b)) === 'done');
    expect(blocked.length).toBe(2);
    expect(starts.filter((t) => t === 'A')).toHaveLength(4);

    // The slot B freed is kept again: a released A slot starts one A row, not two (dispatch
    // fills every slot it may in one synchronous pass, so a second A row would show here).
    await releaseA();
    expect(scheduler.inFlightCount).toBe(2);
    expect(starts.filter((t) => t === 'A')).toHaveLength(5);
  });

  it('a plain queue uses every slot', async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    // Every row of the fair queue ended, not only claimed: a buffered row (executing, not
    // runnable) that started after `flowing` went false would block and add to `blocked`.
    await eventually(async () => (await live('nk-fair')) === 0, 30_000);
    flowing = false;
    starts.length = 0;
    await h.engine.insertAll(
      PlainJob,
      Array.from({ length: 20 }, () => ({ state: { tenant: 'A' } })),
    );
    await eventually(async () => blocked.length === 3);
    expect(h.engine.runtime.schedulers.get('nk-plain')!.inFlightCount).toBe(3);
  });
});
