import { done, DuplicateError, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Inserted claimed (docs/design.md §5.5.1): a lone awaited insert whose queue's scheduler on
// this node has a free slot and nothing waiting is written already claimed by that scheduler
// (INSERT_CLAIMED) and starts without a claim statement. Steps block until the test releases
// them, so which slots are free is the test's to say.

interface JobState {
  readonly n: number;
}

const started: number[] = [];
const blocked: (() => void)[] = [];
let flowing = false;

@DurableFsm({ name: 'ic-job', queue: 'ic' })
class Job {
  @Step() async start(ctx: StepContext<JobState>) {
    started.push(ctx.state.n);
    if (!flowing) await new Promise<void>((resolve) => blocked.push(resolve));
    return done({ n: ctx.state.n });
  }
}

@DurableFsm({ name: 'ic-off-job', queue: 'ic-off' })
class OffJob {
  @Step() start(ctx: StepContext<JobState>) {
    started.push(ctx.state.n);
    return done({});
  }
}

describe('inserted claimed', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [Job], { queues: { ic: 2 } });
  });
  afterAll(async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await h.close();
    await db.drop();
  });
  afterEach(async () => {
    flowing = true;
    while (blocked.length > 0) blocked.shift()!();
    await eventually(async () => (await live()) === 0);
    flowing = false;
    started.length = 0;
  });

  async function live(): Promise<number> {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE status IN ('runnable', 'executing')`,
    );
    return rows[0]!.n;
  }

  async function rowOf(id: string) {
    const { rows } = await db.pool.query<{
      status: string;
      locked_by: string | null;
      claim_seq: string;
    }>(`SELECT status, locked_by, claim_seq::text FROM gen_durable WHERE id = $1`, [id]);
    return rows[0]!;
  }

  /** Statement names run since `mark` (an index into the harness's statement log). */
  const since = (mark: number): string[] => h.statements.slice(mark);

  /** Lets the first claim of the queue come back short (the scheduler's poll at boot). */
  async function settled(): Promise<void> {
    await eventually(async () => h.statements.includes('claim_runnable'));
    await new Promise((r) => setTimeout(r, 100));
  }

  it('a plain insert with a free slot is written claimed and starts without a claim', async () => {
    await settled();
    const mark = h.statements.length;
    const id = await h.engine.insert(Job, { state: { n: 1 } });
    await eventually(async () => started.includes(1));
    expect(since(mark)).toContain('insert_claimed');
    expect(since(mark)).not.toContain('insert_instance');
    expect(since(mark)).not.toContain('claim_runnable');
    const row = await rowOf(id);
    expect(row.status).toBe('executing');
    expect(row.claim_seq).toBe('1');
    expect(row.locked_by).not.toBeNull();
    // The claim is this node's like any other: heartbeats renew its lease (every 500 ms here).
    const leaseAt = async () =>
      (
        await db.pool.query<{ at: string }>(
          `SELECT lease_expires_at::text AS at FROM gen_durable WHERE id = $1`,
          [id],
        )
      ).rows[0]!.at;
    const first = await leaseAt();
    await eventually(async () => (await leaseAt()) > first);
    blocked.shift()!();
    await eventually(async () => (await rowOf(id)).status === 'done');
    expect(await h.engine.get(id)).toMatchObject({ status: 'done', result: { n: 1 } });
  });

  it('without a free slot the insert is a plain one and the row waits for a slot', async () => {
    await settled();
    await h.engine.insert(Job, { state: { n: 1 } });
    await h.engine.insert(Job, { state: { n: 2 } });
    await eventually(async () => started.length === 2);
    const mark = h.statements.length;
    const third = await h.engine.insert(Job, { state: { n: 3 } });
    expect(since(mark)).toContain('insert_instance');
    expect(since(mark)).not.toContain('insert_claimed');
    expect((await rowOf(third)).status).toBe('runnable');
    blocked.shift()!();
    await eventually(async () => started.includes(3));
  });

  it('rows a claim must admit or order are inserted runnable and claimed', async () => {
    await settled();
    const mark = h.statements.length;
    const keyed = await h.engine.insert(Job, { state: { n: 1 }, concurrencyKey: 'k' });
    await eventually(async () => started.includes(1));
    expect(since(mark)).toContain('insert_instance');
    expect(since(mark)).toContain('claim_runnable');
    expect(since(mark)).not.toContain('insert_claimed');
    blocked.shift()!();
    await eventually(async () => (await rowOf(keyed)).status === 'done');
    const later = h.statements.length;
    await h.engine.insert(Job, { state: { n: 2 }, scheduleIn: 200 });
    expect(since(later)).not.toContain('insert_claimed');
    await eventually(async () => started.includes(2));
  });

  it('a duplicate gives the slot back: the next insert is claimed again', async () => {
    await settled();
    await h.engine.insert(Job, { state: { n: 1 }, correlationKey: 'dup' });
    await eventually(async () => started.includes(1));
    // One slot left: the duplicate takes it for its statement and gives it back.
    await expect(
      h.engine.insert(Job, { state: { n: 2 }, correlationKey: 'dup' }),
    ).rejects.toBeInstanceOf(DuplicateError);
    const mark = h.statements.length;
    await h.engine.insert(Job, { state: { n: 3 } });
    expect(since(mark)).toContain('insert_claimed');
    await eventually(async () => started.includes(3));
  });

  it('a queue paused by another node (not yet learned here) gets its row runnable, not claimed', async () => {
    await settled();
    // Another node's pause: the row this node's scheduler has not read yet.
    await db.pool.query(`INSERT INTO gen_durable_paused_queues (queue) VALUES ('ic')`);
    try {
      const mark = h.statements.length;
      const id = await h.engine.insert(Job, { state: { n: 1 } });
      expect(since(mark)).toContain('insert_claimed');
      const row = await rowOf(id);
      expect(row).toMatchObject({ status: 'runnable', locked_by: null, claim_seq: '0' });
      await new Promise((r) => setTimeout(r, 300));
      expect(started).toEqual([]);
    } finally {
      await db.pool.query(`DELETE FROM gen_durable_paused_queues WHERE queue = 'ic'`);
    }
    await eventually(async () => started.includes(1), 10_000);
  });
});

describe('inserted claimed, a trickle on an idle queue', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    // No poll tick during the test: every claim_runnable it sees comes from a step's end.
    h = await bootEngine(db, [OffJob], {
      queues: { 'ic-off': 2 },
      pollInterval: 600_000,
      maxPollInterval: 600_000,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it("a row inserted claimed ends without a refill claim: the drained queue's next insert is claimed too", async () => {
    // The boot's first poll (before the harness's log starts) came back short: the queue is drained.
    await eventually(async () => h.engine.runtime.schedulers.get('ic-off')!.reserveInserted());
    h.engine.runtime.schedulers.get('ic-off')!.cancelInserted();
    const mark = h.statements.length;
    for (let n = 0; n < 10; n++) {
      const id = await h.engine.insert(OffJob, { state: { n } });
      await h.engine.await(id, { until: 'terminal' });
    }
    const run = h.statements.slice(mark);
    expect(run.filter((name) => name === 'insert_claimed')).toHaveLength(10);
    // Before: one claim after each step's end, each coming back empty.
    expect(run.filter((name) => name === 'claim_runnable')).toEqual([]);
    // New work still pokes its own claim: a keyed row is inserted runnable and claimed at once.
    const keyed = await h.engine.insert(OffJob, { state: { n: 99 }, concurrencyKey: 'k' });
    expect(await h.engine.await(keyed, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: {},
    });
    expect(h.statements.slice(mark)).toContain('claim_runnable');
  });
});

describe('inserted claimed, with poke: none', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [OffJob], { queues: { 'ic-off': 2 }, poke: 'none' });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('every insert is a plain one: the poll claims it', async () => {
    await new Promise((r) => setTimeout(r, 200));
    const mark = h.statements.length;
    await h.engine.insert(OffJob, { state: { n: 7 } });
    expect(h.statements.slice(mark)).toContain('insert_instance');
    expect(h.statements.slice(mark)).not.toContain('insert_claimed');
    await eventually(async () => started.includes(7));
  });
});
