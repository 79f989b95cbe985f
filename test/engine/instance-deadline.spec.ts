import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  next,
  type Outcome,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import {
  bootEngine,
  claimRows,
  eventually,
  execute,
  Gates,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Instance deadlines (docs/operations-control.md "Instance deadlines"): a live instance past its
// deadline is cancelled (an executing one cooperatively, fenced after its FSM's grace) or moved
// to its FSM's `onDeadline` step. The first suite drives claims and steps by hand on queues no
// scheduler serves and fires the deadlines by the reaper's sweep (no timer: every deadline is
// beyond the poll horizon, then moved into the past in the table); the second runs queues with
// no reaper anywhere, so only the inserting node's local timer can fire them.

type Kind = 'park' | 'next' | 'done';
const gates = new Gates();

async function body(ctx: StepContext<{ kind: Kind; tag: string }>): Promise<Outcome> {
  if (ctx.state.kind === 'park') return awaitSignal('go', 'after', ctx.state);
  await gates.wait(ctx.state.tag);
  return ctx.state.kind === 'next' ? next('after', ctx.state) : done({ finished: ctx.state.tag });
}

@DurableFsm({
  name: 'dl-cancel',
  queue: 'nowhere',
  deadlineGraceMs: 60_000,
  history: 'transitions',
})
class CancelFsm {
  @Step() start(ctx: StepContext<{ kind: Kind; tag: string }>) {
    return body(ctx);
  }
  @Step() after() {
    return done({ after: true });
  }
}

@DurableFsm({
  name: 'dl-route',
  queue: 'nowhere',
  onDeadline: 'expired',
  deadlineGraceMs: 60_000,
  history: 'transitions',
})
class RouteFsm {
  @Step() start(ctx: StepContext<{ kind: Kind; tag: string }>) {
    return body(ctx);
  }
  @Step() after() {
    return done({ after: true });
  }
  @Step() expired(ctx: StepContext<{ tag: string }>) {
    return done({ expired: ctx.state.tag });
  }
}

@DurableFsm({ name: 'dl-default', queue: 'nowhere', deadlineMs: 3_600_000 })
class DefaultFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'dl-parent', queue: 'nowhere' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren(
      'joined',
      [DefaultFsm, { fsm: DefaultFsm, deadlineInMs: 15_000, correlationKey: 'dl-child' }],
      ctx.state,
    );
  }
  @Step() joined() {
    return done({});
  }
}

/** An hour: beyond the poll horizon, so no local timer is armed. */
const FAR = 3_600_000;

describe('instance deadlines, fired by the sweep', () => {
  let db: TestDatabase;
  let h: Harness;
  let n = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [CancelFsm, RouteFsm, DefaultFsm, ParentFsm], {
      queues: {},
      // A reaper whose only sweep in the test's time is the boot sweep: the tests call it.
      reaper: { interval: 3_600_000 },
      gc: false,
      poke: 'none',
    });
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  /** Moves `id`'s deadline `ms` into the past. */
  async function overdue(id: string, ms: number): Promise<void> {
    await db.pool.query(
      `UPDATE gen_durable SET deadline_at = now() - make_interval(secs => $2::float8 / 1000) WHERE id = $1`,
      [id, ms],
    );
  }

  const sweep = async (): Promise<number> => (await h.engine.runtime.reaper!.sweep()).deadlines;

  /** A row of `fsm` inserted on its own queue with a far deadline. */
  async function inserted(fsm: typeof CancelFsm | typeof RouteFsm, kind: Kind) {
    const tag = `t${++n}`;
    const queue = `dl-${n}`;
    const id = await h.engine.insert(fsm, { state: { kind, tag }, queue, deadlineInMs: FAR });
    return { id, tag, queue };
  }

  /** A row claimed and its step started: parked (`park`), or waiting at its gate. */
  async function started(fsm: typeof CancelFsm | typeof RouteFsm, kind: Kind) {
    const { id, tag, queue } = await inserted(fsm, kind);
    const [row] = await claimRows(h.engine, queue, 1, `worker-${n}`);
    expect(row?.id).toBe(id);
    const reply = execute(h.engine, row!);
    if (kind === 'park') expect(await reply).toBe('committed');
    else await gates.reached(tag);
    return { id, tag, queue, reply };
  }

  it('a runnable row past its deadline is cancelled by the sweep, with reason and history', async () => {
    const { id } = await inserted(CancelFsm, 'done');
    expect(h.engine.runtime.instanceDeadlines.pending('')).toBe(0);
    expect(await sweep()).toBe(0);
    await overdue(id, 1);
    h.clear();
    expect(await sweep()).toBe(1);
    expect(h.statements).toContain('due_instance_deadlines');
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', cancel_reason: 'deadline' });
    expect(h.eventsOf('instance:deadline').map((e) => e.measurements)).toEqual([
      { cancelled: 1, requested: 0, routed: 0 },
    ]);
    const history = await h.engine.history(id);
    expect(history.map((e) => [e.kind, e.outcome, e.actor])).toEqual([
      ['manual.cancel', 'cancelled', 'deadline'],
    ]);
    expect(await h.engine.await(id, { timeout: 1000, until: 'terminal' })).toEqual({
      kind: 'cancelled',
      reason: 'deadline',
    });
    // Ended: the next sweep finds nothing.
    expect(await sweep()).toBe(0);
  });

  it('a retry of a row the deadline cancelled clears the passed deadline, so it runs', async () => {
    const { id, queue } = await inserted(CancelFsm, 'park');
    await overdue(id, 1);
    expect(await sweep()).toBe(1);
    await h.engine.retry(id);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', deadline_at: null });
    expect(await sweep()).toBe(0);
    const [row] = await claimRows(h.engine, queue, 1, 'w');
    expect(await execute(h.engine, row!)).toBe('committed');
    expect((await rowOf(db, id))['status']).toBe('awaiting_signal');
  });

  it('a parked row past its deadline is cancelled', async () => {
    const { id } = await started(CancelFsm, 'park');
    expect((await rowOf(db, id))['status']).toBe('awaiting_signal');
    await overdue(id, 1);
    expect(await sweep()).toBe(1);
    expect((await rowOf(db, id))['status']).toBe('cancelled');
  });

  it('an executing row is asked to stop at its deadline, and its flush ends it cancelled', async () => {
    const { id, tag, reply } = await started(CancelFsm, 'next');
    await overdue(id, 1);
    h.clear();
    expect(await sweep()).toBe(1);
    expect(h.eventsOf('instance:deadline').map((e) => e.measurements)).toEqual([
      { cancelled: 0, requested: 1, routed: 0 },
    ]);
    const during = await rowOf(db, id);
    expect(during).toMatchObject({ status: 'executing', cancel_reason: 'deadline' });
    expect(during['cancel_requested_at']).toBeInstanceOf(Date);
    // Within the grace a second sweep leaves the requested row alone.
    expect(await sweep()).toBe(0);
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', step: 'start' });
  });

  it('an executing row still running after its grace is fenced and cancelled; its late outcome is stale', async () => {
    const { id, tag, reply } = await started(CancelFsm, 'next');
    const before = await rowOf(db, id);
    await overdue(id, 61_000);
    expect(await sweep()).toBe(1);
    const after = await rowOf(db, id);
    expect(after).toMatchObject({ status: 'cancelled', locked_by: null });
    expect(BigInt(after['claim_seq'] as string)).toBe(BigInt(before['claim_seq'] as string) + 1n);
    gates.open(tag);
    expect(await reply).toBe('stale');
    expect((await rowOf(db, id))['status']).toBe('cancelled');
  });

  it('onDeadline: a parked row moves to the step, awaits and deadline cleared, and runs it', async () => {
    const { id, tag, queue } = await started(RouteFsm, 'park');
    await overdue(id, 1);
    h.clear();
    expect(await sweep()).toBe(1);
    expect(h.eventsOf('instance:deadline').map((e) => e.measurements)).toEqual([
      { cancelled: 0, requested: 0, routed: 1 },
    ]);
    expect(await rowOf(db, id)).toMatchObject({
      status: 'runnable',
      step: 'expired',
      awaits: null,
      await_deadline: null,
      deadline_at: null,
      attempt: 0,
    });
    const history = await h.engine.history(id);
    expect(history.find((e) => e.kind === 'deadline')).toMatchObject({
      nextStep: 'expired',
      outcome: 'runnable',
    });
    const [row] = await claimRows(h.engine, queue, 1, 'w');
    expect(await execute(h.engine, row!)).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'done', result: { expired: tag } });
    // Moved once: its deadline is gone, so no sweep moves it again.
    expect(await sweep()).toBe(0);
  });

  it('onDeadline: a runnable row moves at once', async () => {
    const { id } = await inserted(RouteFsm, 'done');
    await overdue(id, 1);
    expect(await sweep()).toBe(1);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'expired' });
  });

  it('one sweep pages through 2 500 overdue rows: 1 000 it leaves alone, then 1 500 it cancels', async () => {
    // The most overdue page: executing rows of an onDeadline FSM within their grace, left
    // alone. Behind them 1 500 runnable rows to cancel: one sweep reads them by its keyset
    // pages (docs/operations-control.md "Instance deadlines"), not one page per interval.
    const waiting = await h.engine.insertAll(
      RouteFsm,
      Array.from({ length: 1000 }, (_, i) => ({
        state: { kind: 'done', tag: `wait-${i}` },
        queue: 'dl-page-exec',
        deadlineInMs: FAR,
      })),
    );
    expect(await claimRows(h.engine, 'dl-page-exec', 1000, 'pager')).toHaveLength(1000);
    const backlog = await h.engine.insertAll(
      CancelFsm,
      Array.from({ length: 1500 }, (_, i) => ({
        state: { kind: 'done', tag: `b-${i}` },
        queue: 'dl-page',
        deadlineInMs: FAR,
      })),
    );
    await db.pool.query(
      `UPDATE gen_durable SET deadline_at = now() - interval '30 seconds' WHERE id = ANY ($1::bigint[])`,
      [waiting],
    );
    await db.pool.query(
      `UPDATE gen_durable SET deadline_at = now() - interval '10 seconds' WHERE id = ANY ($1::bigint[])`,
      [backlog],
    );
    expect(await sweep()).toBeGreaterThanOrEqual(1500);
    const { rows } = await db.pool.query<{ status: string; n: number }>(
      `SELECT status::text, count(*)::int AS n FROM gen_durable WHERE id = ANY ($1::bigint[])
        GROUP BY status ORDER BY status`,
      [[...waiting, ...backlog]],
    );
    expect(rows).toEqual([
      { status: 'cancelled', n: 1500 },
      { status: 'executing', n: 1000 },
    ]);
    // Out of the later tests' sweeps: the executing rows lose their deadline.
    await db.pool.query(`UPDATE gen_durable SET deadline_at = NULL WHERE id = ANY ($1::bigint[])`, [
      waiting,
    ]);
  }, 90_000);

  it('onDeadline: an executing row is left alone within its grace, then fenced and moved', async () => {
    const { id, tag, queue, reply } = await started(RouteFsm, 'next');
    const before = await rowOf(db, id);
    await overdue(id, 1);
    expect(await sweep()).toBe(0);
    expect(await rowOf(db, id)).toMatchObject({ status: 'executing', cancel_requested_at: null });
    await overdue(id, 61_000);
    expect(await sweep()).toBe(1);
    const after = await rowOf(db, id);
    expect(after).toMatchObject({ status: 'runnable', step: 'expired', locked_by: null });
    expect(BigInt(after['claim_seq'] as string)).toBe(BigInt(before['claim_seq'] as string) + 1n);
    gates.open(tag);
    expect(await reply).toBe('stale');
    const [row] = await claimRows(h.engine, queue, 1, 'w');
    expect(row?.id).toBe(id);
    expect(await execute(h.engine, row!)).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'done', result: { expired: tag } });
  });

  it('onDeadline: a row whose step committed `next` within its grace is moved from where it went', async () => {
    const { id, tag, reply } = await started(RouteFsm, 'next');
    await overdue(id, 1);
    expect(await sweep()).toBe(0);
    gates.open(tag);
    expect(await reply).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'after' });
    expect(await sweep()).toBe(1);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'expired' });
  });

  it('the FSM default, and the insert options that win over it, on every insert path', async () => {
    const span = async (id: string): Promise<number> => {
      const view = await h.engine.get(id);
      return view!.deadline!.getTime() - view!.insertedAt.getTime();
    };
    expect(await span(await h.engine.insert(DefaultFsm))).toBe(FAR);
    expect(await span(await h.engine.insert(DefaultFsm, { deadlineInMs: 5000 }))).toBe(5000);
    const at = new Date(Date.now() + 7_200_000);
    const absolute = await h.engine.insert(DefaultFsm, { deadline: at, deadlineInMs: 5000 });
    expect((await h.engine.get(absolute))!.deadline).toEqual(at);
    const many = await h.engine.insertAll(DefaultFsm, [
      { correlationKey: 'dl-all-1' },
      { correlationKey: 'dl-all-2', deadlineInMs: 9000 },
    ]);
    const byKey = async (key: string) => (await h.engine.get({ correlationKey: key }))!.id;
    expect(many).toHaveLength(2);
    expect(await span(await byKey('dl-all-1'))).toBe(FAR);
    expect(await span(await byKey('dl-all-2'))).toBe(9000);
    await h.engine.insertAsync(DefaultFsm, { correlationKey: 'dl-async', deadlineInMs: 11_000 });
    expect(await span(await byKey('dl-async'))).toBe(11_000);
    const skipped = await h.engine.insert(DefaultFsm, {
      correlationKey: 'dl-skip',
      onConflict: 'skip',
      deadlineInMs: 13_000,
    });
    expect(await span(skipped)).toBe(13_000);
    // Children a step schedules: the FSM default, or the child's own options.
    const parent = await h.engine.insert(ParentFsm, { queue: 'dl-parent' });
    const [claimed] = await claimRows(h.engine, 'dl-parent', 1, 'w');
    expect(await execute(h.engine, claimed!)).toBe('committed');
    const children = (await h.engine.list({ parentId: parent })).items;
    expect(children).toHaveLength(2);
    const spans = await Promise.all(children.map((c) => span(c.id)));
    expect(spans.sort((a, b) => a - b)).toEqual([15_000, FAR]);
    // A row of an FSM without a deadline has none.
    const { id } = await inserted(CancelFsm, 'done');
    await db.pool.query(`UPDATE gen_durable SET deadline_at = NULL WHERE id = $1`, [id]);
    expect((await h.engine.get(id))!.deadline).toBeNull();
  });

  it('refuses a bad deadline, naming the field', async () => {
    await expect(h.engine.insert(CancelFsm, { deadlineInMs: 0 })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.insert(CancelFsm, { deadline: new Date(Number.NaN) })).rejects.toThrow(
      /insert\.deadline/,
    );
    await expect(h.engine.insertAll(CancelFsm, [{ deadlineInMs: 1.5 }])).rejects.toThrow(
      /insertAll\[0\]\.deadlineInMs/,
    );
  });

  describe('racing the final outcome: the instance ends once', () => {
    /** Holds `id`'s row lock on a connection of its own until `release`. */
    async function blocker(id: string) {
      const client = await db.pool.connect();
      await client.query('BEGIN');
      await client.query(`SELECT 1 FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE`, [id]);
      return {
        release: async () => {
          await client.query('COMMIT');
          client.release();
        },
      };
    }
    /** Resolves once `count` statements of this database wait for a lock. */
    const lockWaiters = (count: number) =>
      eventually(async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0]!.n >= count;
      });

    async function kindsOf(id: string): Promise<string[]> {
      return (await h.engine.history(id)).map((e) => `${e.kind}:${e.outcome ?? ''}`);
    }

    it('the deadline first: the fenced cancel commits, the `done` outcome is stale', async () => {
      const { id, tag, reply } = await started(CancelFsm, 'done');
      await overdue(id, 61_000);
      const lock = await blocker(id);
      const fired = sweep();
      await lockWaiters(1);
      gates.open(tag);
      await lockWaiters(2);
      await lock.release();
      expect(await fired).toBe(1);
      expect(await reply).toBe('stale');
      expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', result: null });
      expect(await kindsOf(id)).toEqual(['manual.cancel:cancelled']);
    });

    it('the outcome first: `done` commits, the deadline finds the row ended and writes nothing', async () => {
      const { id, tag, reply } = await started(CancelFsm, 'done');
      await overdue(id, 61_000);
      const lock = await blocker(id);
      gates.open(tag);
      await lockWaiters(1);
      const fired = sweep();
      await lockWaiters(2);
      await lock.release();
      expect(await reply).toBe('committed');
      expect(await fired).toBe(0);
      expect(await rowOf(db, id)).toMatchObject({
        status: 'done',
        result: { finished: tag },
        cancel_requested_at: null,
      });
      expect(await kindsOf(id)).toEqual(['done:done']);
    });

    it('onDeadline, the outcome first: `done` commits and the row is not moved', async () => {
      const { id, tag, reply } = await started(RouteFsm, 'done');
      await overdue(id, 61_000);
      const lock = await blocker(id);
      gates.open(tag);
      await lockWaiters(1);
      const fired = sweep();
      await lockWaiters(2);
      await lock.release();
      expect(await reply).toBe('committed');
      expect(await fired).toBe(0);
      expect(await rowOf(db, id)).toMatchObject({ status: 'done', step: 'start' });
      expect(await kindsOf(id)).toEqual(['done:done']);
    });

    it('onDeadline, the deadline first: the row is moved, the `done` outcome is stale', async () => {
      const { id, tag, reply } = await started(RouteFsm, 'done');
      await overdue(id, 61_000);
      const lock = await blocker(id);
      const fired = sweep();
      await lockWaiters(1);
      gates.open(tag);
      await lockWaiters(2);
      await lock.release();
      expect(await fired).toBe(1);
      expect(await reply).toBe('stale');
      expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'expired' });
      expect(await kindsOf(id)).toEqual(['deadline:runnable']);
    });
  });
});

@DurableFsm({ name: 'dl-timer', queue: 'dl-timer' })
class TimerFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('never', 'after', ctx.state);
  }
  @Step() after() {
    return done({ after: true });
  }
}

@DurableFsm({ name: 'dl-timer-route', queue: 'dl-timer', onDeadline: 'expired' })
class TimerRouteFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('never', 'after', ctx.state);
  }
  @Step() after() {
    return done({ after: true });
  }
  @Step() expired() {
    return done({ expired: true });
  }
}

describe('instance deadlines through the durable insert batcher', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [DefaultFsm], {
      queues: {},
      reaper: false,
      poke: 'none',
      insertBatcher: { durable: true },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('a group-committed insert carries its deadline, or the FSM default', async () => {
    t.clear();
    // Natural batching: the first call goes alone, the ones behind it share one statement.
    const [first, own, fallback] = await Promise.all([
      t.engine.insert(DefaultFsm, { deadlineInMs: 4000 }),
      t.engine.insert(DefaultFsm, { deadlineInMs: 4000 }),
      t.engine.insert(DefaultFsm),
    ]);
    expect(t.statements).toEqual(['insert_instance', 'insert_unkeyed_instances']);
    const span = async (id: string): Promise<number> => {
      const view = await t.engine.get(id);
      return view!.deadline!.getTime() - view!.insertedAt.getTime();
    };
    expect(await span(first)).toBe(4000);
    expect(await span(own)).toBe(4000);
    expect(await span(fallback)).toBe(FAR);
  });
});

describe('instance deadlines fired by the inserting node', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [TimerFsm, TimerRouteFsm], {
      queues: { 'dl-timer': 2 },
      reaper: false,
      poke: 'local',
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('cancels a parked instance at a 300 ms deadline with no reaper anywhere', async () => {
    const id = await t.engine.insert(TimerFsm, { deadlineInMs: 300 });
    expect(t.engine.runtime.instanceDeadlines.pending('')).toBeGreaterThan(0);
    expect(await t.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'cancelled',
      reason: 'deadline',
    });
    expect(t.statements).toContain('due_instance_deadlines');
  });

  it('moves an instance to its onDeadline step, which runs at once', async () => {
    const id = await t.engine.insert(TimerRouteFsm, { deadlineInMs: 300 });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { expired: true },
    });
  });
});
