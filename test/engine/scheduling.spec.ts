import {
  done,
  DurableFsm,
  InvalidInputError,
  InvalidOutcomeError,
  retry,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Scheduling (docs/design.md §12, §2.5): delays on the database clock with eligibleAt > scheduleAt >
// scheduleIn, priority lower-first within a queue, the per-instance queue override and retry
// delays — all through the production claim's (priority, eligible_at) order.

const ran: string[] = [];
const gates = new Map<string, { opened: Promise<void>; open(): void; entered: boolean }>();
function gate(key: string): { opened: Promise<void>; open(): void; entered: boolean } {
  let g = gates.get(key);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { opened, open, entered: false };
    gates.set(key, g);
  }
  return g;
}

type TaskState = { label: string; retryOnceMs?: number; gate?: string };

/** Records its label in execution order. */
@DurableFsm({ name: 'task' })
class TaskFsm {
  @Step() async start(ctx: StepContext<TaskState>) {
    ran.push(`${ctx.state.label}#${ctx.attempt}`);
    if (ctx.state.gate) {
      const g = gate(ctx.state.gate);
      g.entered = true;
      await g.opened;
    }
    if (ctx.state.retryOnceMs !== undefined && ctx.attempt === 0) {
      return retry(ctx.state, ctx.state.retryOnceMs);
    }
    return done({ label: ctx.state.label, attempt: ctx.attempt });
  }
}

/** Same step shape, on its own default queue. */
@DurableFsm({ name: 'report', queue: 'reports' })
class ReportFsm {
  @Step() start(ctx: StepContext<TaskState>) {
    ran.push(`${ctx.state.label}#${ctx.attempt}`);
    return done({ label: ctx.state.label });
  }
}

describe('scheduling: delays, priority, queues, retry delays (docs/design.md §12)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    // `serial` runs one step at a time, so execution order is the claim order.
    t = await bootEngine(db, [TaskFsm, ReportFsm], {
      queues: { default: 4, serial: 1, reports: 1 },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const dbDelayMs = async (id: string): Promise<number> =>
    Number(
      (
        await db.pool.query<{ ms: string }>(
          `SELECT round(extract(epoch FROM eligible_at - inserted_at) * 1000) AS ms FROM gen_durable WHERE id = $1`,
          [id],
        )
      ).rows[0]!.ms,
    );
  const picksSince = (from: number): number =>
    t.statements.slice(from).filter((s) => s === 'claim_runnable').length;

  it('scheduleIn counts on the database clock; a delayed row is not claimed before it is due', async () => {
    const id = await t.engine.insert(TaskFsm, { state: { label: 'later' }, scheduleIn: 1500 });
    expect(await dbDelayMs(id)).toBe(1500);
    const from = t.statements.length;
    await eventually(async () => picksSince(from) >= 3);
    expect((await t.engine.get({ id }))?.status).toBe('runnable');
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { label: 'later', attempt: 0 },
    });
  });

  it('precedence: eligibleAt > scheduleAt > scheduleIn', async () => {
    const eligibleAt = new Date(Date.now() + 3_600_000);
    const scheduleAt = new Date(Date.now() + 7_200_000);
    const a = await t.engine.insert(TaskFsm, {
      state: { label: 'p1' },
      eligibleAt,
      scheduleAt,
      scheduleIn: 5,
    });
    const b = await t.engine.insert(TaskFsm, { state: { label: 'p2' }, scheduleAt, scheduleIn: 5 });
    const c = await t.engine.insert(TaskFsm, { state: { label: 'p3' }, scheduleIn: 86_400_000 });
    expect((await t.engine.get({ id: a }))!.eligibleAt.getTime()).toBe(eligibleAt.getTime());
    expect((await t.engine.get({ id: b }))!.eligibleAt.getTime()).toBe(scheduleAt.getTime());
    expect(await dbDelayMs(c)).toBe(86_400_000);
  });

  it('priority runs lower first, then eligible_at, within a queue', async () => {
    ran.length = 0;
    const base = Date.now() - 60_000;
    const at = (s: number) => new Date(base + s * 1000);
    const entries = [
      { label: 'p5-early', priority: 5, eligibleAt: at(1) },
      { label: 'p0-late', priority: 0, eligibleAt: at(9) },
      { label: 'p1', priority: 1, eligibleAt: at(2) },
      { label: 'p0-early', priority: 0, eligibleAt: at(3) },
      { label: 'neg', priority: -3, eligibleAt: at(8) },
      { label: 'p0-mid', priority: 0, eligibleAt: at(5) },
    ];
    const shuffled = [...entries].sort(() => Math.random() - 0.5);
    const ids = await t.engine.insertAll(
      TaskFsm,
      shuffled.map((e) => ({
        state: { label: e.label },
        queue: 'serial',
        priority: e.priority,
        eligibleAt: e.eligibleAt,
      })),
    );
    await Promise.all(ids.map((id) => t.engine.await(id, { until: 'terminal', timeout: 10_000 })));
    expect(ran).toEqual(['neg#0', 'p0-early#0', 'p0-mid#0', 'p0-late#0', 'p1#0', 'p5-early#0']);
  });

  it('retry delays go through the same order: a retried row re-enters at now() + delay', async () => {
    ran.length = 0;
    const base = Date.now() - 60_000;
    const at = (s: number) => new Date(base + s * 1000);
    const ids = await t.engine.insertAll(TaskFsm, [
      {
        state: { label: 'flaky', retryOnceMs: 0 },
        queue: 'serial',
        priority: 0,
        eligibleAt: at(1),
      },
      { state: { label: 'older' }, queue: 'serial', priority: 0, eligibleAt: at(2) },
      { state: { label: 'oldest-low' }, queue: 'serial', priority: 1, eligibleAt: at(0) },
    ]);
    await Promise.all(ids.map((id) => t.engine.await(id, { until: 'terminal', timeout: 10_000 })));
    // The retry (delay 0) is due now: behind older work of its priority, ahead of lower priority.
    expect(ran).toEqual(['flaky#0', 'older#0', 'flaky#1', 'oldest-low#0']);
  });

  it('a retry delay is measured on the database clock and keeps the row runnable meanwhile', async () => {
    const id = await t.engine.insert(TaskFsm, { state: { label: 'backoff', retryOnceMs: 1200 } });
    await eventually(async () => (await t.engine.get({ id }))?.attempt === 1);
    const { rows } = await db.pool.query<{ status: string; ms: string }>(
      `SELECT status, round(extract(epoch FROM eligible_at - updated_at) * 1000) AS ms FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ status: 'runnable', ms: '1200' });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { label: 'backoff', attempt: 1 },
    });
  });

  it('queue: the insert option overrides the FSM queue; rows of a queue no node runs wait', async () => {
    const onSerial = await t.engine.insert(ReportFsm, {
      state: { label: 'moved' },
      queue: 'serial',
    });
    const onDefault = await t.engine.insert(ReportFsm, { state: { label: 'native' } });
    const nowhere = await t.engine.insert(TaskFsm, {
      state: { label: 'nowhere' },
      queue: 'nowhere',
    });
    expect((await t.engine.get({ id: onSerial }))?.queue).toBe('serial');
    expect((await t.engine.get({ id: onDefault }))?.queue).toBe('reports');
    expect(await t.engine.await(onSerial, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    expect(await t.engine.await(onDefault, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    const serialWorker = t.engine.runtime.schedulers.get('serial')!.workerId;
    expect(serialWorker).toContain(':serial@');
    const from = t.statements.length;
    await eventually(async () => picksSince(from) >= 3);
    expect((await t.engine.get({ id: nowhere }))?.status).toBe('runnable');
  });

  it('the row is claimed by the scheduler of its own queue', async () => {
    const gated = await t.engine.insert(TaskFsm, {
      state: { label: 'held', gate: 'held' },
      queue: 'serial',
    });
    await eventually(async () => gate('held').entered);
    expect((await t.engine.get({ id: gated }))?.lockedBy).toBe(
      t.engine.runtime.schedulers.get('serial')!.workerId,
    );
    gate('held').open();
    expect(await t.engine.await(gated, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
  });

  it('bad delays and priorities are typed errors; nothing is written', async () => {
    const count = async () =>
      (await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM gen_durable`)).rows[0]!.n;
    const before = await count();
    await expect(t.engine.insert(TaskFsm, { scheduleIn: -1 })).rejects.toThrow(InvalidInputError);
    await expect(t.engine.insert(TaskFsm, { scheduleIn: 1.5 })).rejects.toThrow(/scheduleIn/);
    await expect(t.engine.insert(TaskFsm, { scheduleAt: new Date(Number.NaN) })).rejects.toThrow(
      /scheduleAt/,
    );
    // Out of PostgreSQL's range: refused at the call, before a group commit could carry them.
    await expect(t.engine.insert(TaskFsm, { scheduleIn: 1e20 })).rejects.toThrow(
      /scheduleIn: must be an integer number of ms in 0/,
    );
    await expect(t.engine.insert(TaskFsm, { eligibleAt: new Date(-8.64e15) })).rejects.toThrow(
      /eligibleAt: must be a valid Date in years 1/,
    );
    await expect(t.engine.insertAsync(TaskFsm, { scheduleAt: new Date(8.64e15) })).rejects.toThrow(
      /scheduleAt: must be a valid Date in years 1/,
    );
    await expect(t.engine.insert(TaskFsm, { priority: 40_000 })).rejects.toThrow(/priority/);
    await expect(t.engine.insertAll(TaskFsm, [{}, { priority: 0.5 }])).rejects.toThrow(
      /insertAll\[1\]\.priority/,
    );
    expect(await count()).toBe(before);
    expect(() => retry({}, -5)).toThrow(InvalidOutcomeError);
  });
});
