import { filter, firstValueFrom } from 'rxjs';

import {
  awaitSignal,
  done,
  DurableFsm,
  next,
  NoTargetError,
  retry,
  Step,
  stop,
  type StepContext,
} from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { flushEntry, submitTogether } from '../support/flush-entries';
import { claimOn, openRawSession } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §8 and §25 item 3 on real PostgreSQL: delivery, parking, the lost-wakeup recheck,
// exact consumption, life-long dedup, NoTargetError and await timeouts.

interface Seen {
  step: string;
  attempt: number;
  awaited: { id: string; name: string; payload: unknown }[];
  all: { id: string; name: string }[];
}

const seen = new Map<string, Seen[]>();
function record(ctx: StepContext<unknown>): void {
  const list = seen.get(ctx.id) ?? [];
  list.push({
    step: ctx.step,
    attempt: ctx.attempt,
    awaited: ctx.awaited.map((s) => ({ id: s.id, name: s.name, payload: s.payload })),
    all: ctx.all.map((s) => ({ id: s.id, name: s.name })),
  });
  seen.set(ctx.id, list);
}
const runsOf = (id: string, step?: string): Seen[] =>
  (seen.get(id) ?? []).filter((s) => step === undefined || s.step === step);

/** Test-controlled gates a step waits on, by instance id. */
const gates = new Map<string, { opened: Promise<void>; open(): void; entered: boolean }>();
function gate(id: string): { opened: Promise<void>; open(): void; entered: boolean } {
  let g = gates.get(id);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { opened, open, entered: false };
    gates.set(id, g);
  }
  return g;
}

type WaitState = { names?: string[]; timeout?: number; failWith?: string };

@DurableFsm({ name: 'wait-once' })
class WaitOnceFsm {
  @Step() start(ctx: StepContext<WaitState>) {
    return awaitSignal(
      ctx.state.names ?? 'go',
      'got',
      ctx.state,
      ctx.state.timeout ? { timeout: ctx.state.timeout } : {},
    );
  }
  @Step() got(ctx: StepContext<WaitState>) {
    record(ctx);
    if (ctx.state.failWith) return stop(ctx.state.failWith);
    return done({ payloads: ctx.awaited.map((s) => s.payload) });
  }
}

type PackState = { seenCount: number; timeout?: number };

/** Collects a pack of `a` and `b` by re-awaiting; a wake that brings nothing new is the timeout. */
@DurableFsm({ name: 'pack' })
class PackFsm {
  @Step() start(ctx: StepContext<PackState>) {
    return awaitSignal(
      ['a', 'b'],
      'collect',
      ctx.state,
      ctx.state.timeout ? { timeout: ctx.state.timeout } : {},
    );
  }
  @Step() collect(ctx: StepContext<PackState>) {
    record(ctx);
    const names = new Set(ctx.awaited.map((s) => s.name));
    if (names.has('a') && names.has('b')) return done({ complete: true });
    if (ctx.awaited.length === ctx.state.seenCount) {
      return done({ complete: false, partial: [...names] });
    }
    const state = { ...ctx.state, seenCount: ctx.awaited.length };
    return awaitSignal(
      ['a', 'b'],
      'collect',
      state,
      ctx.state.timeout ? { timeout: ctx.state.timeout } : {},
    );
  }
}

/** Wakes on `x`, holds its step open on a gate, then continues: latecomers must survive. */
@DurableFsm({ name: 'latecomer' })
class LatecomerFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('x', 'work', ctx.state);
  }
  @Step() async work(ctx: StepContext) {
    record(ctx);
    const g = gate(ctx.id);
    g.entered = true;
    await g.opened;
    return next('again', ctx.state);
  }
  @Step() again(ctx: StepContext) {
    record(ctx);
    return awaitSignal('x', 'end', ctx.state);
  }
  @Step() end(ctx: StepContext) {
    record(ctx);
    return done({ payloads: ctx.awaited.map((s) => s.payload) });
  }
}

/** Retries twice after waking: each attempt must see the same `awaited`. */
@DurableFsm({ name: 'retrier' })
class RetrierFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'flaky', ctx.state);
  }
  @Step() flaky(ctx: StepContext) {
    record(ctx);
    if (ctx.attempt === 0) return retry(ctx.state, 0);
    if (ctx.attempt === 1) throw new Error('transient');
    return done({ attempts: ctx.attempt + 1 });
  }
  onError(_err: unknown, ctx: StepContext) {
    return retry(ctx.state, 0);
  }
}

/** ping → pong (consumes via next) → rest → re-awaits once: dedup must outlive consumption. */
@DurableFsm({ name: 'looper' })
class LooperFsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return awaitSignal('ping', 'pong', ctx.state);
  }
  @Step() pong(ctx: StepContext<{ n: number }>) {
    record(ctx);
    return next('rest', ctx.state);
  }
  @Step() rest(ctx: StepContext<{ n: number }>) {
    return ctx.state.n < 1
      ? awaitSignal('ping', 'pong', { n: ctx.state.n + 1 })
      : done({ rounds: ctx.state.n + 1 });
  }
}

describe('signals and await-parking (docs/design.md §8, §25.3)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [WaitOnceFsm, PackFsm, LatecomerFsm, RetrierFsm, LooperFsm], {
      queues: { default: 8 },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const status = async (id: string): Promise<string | undefined> =>
    (await t.engine.get({ id }))?.status;
  const inbox = async (id: string) =>
    (
      await db.pool.query<{
        id: string;
        name: string;
        consumed: boolean;
        dedup_key: string | null;
      }>(
        `SELECT id, name, consumed_at IS NOT NULL AS consumed, dedup_key FROM gen_durable_signals WHERE target_id = $1 ORDER BY id`,
        [id],
      )
    ).rows;

  it('delivery is one statement', async () => {
    const id = await t.engine.insert(WaitOnceFsm);
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    t.clear();
    await t.engine.signal({ id }, 'go', { n: 1 });
    expect(t.statements.filter((s) => s === 'deliver_signal')).toHaveLength(1);
    expect(t.statements.slice(0, 1)).toEqual(['deliver_signal']);
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { payloads: [{ n: 1 }] },
    });
  });

  it('a signal delivered before the park wakes the row through the recheck', async () => {
    // Not yet due: the delivery finds a runnable row, stores the signal and flips nothing.
    const id = await t.engine.insert(WaitOnceFsm, { scheduleIn: 1500 });
    await t.engine.signal({ id }, 'go', { early: true });
    expect(await status(id)).toBe('runnable');
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { payloads: [{ early: true }] },
    });
    expect(runsOf(id, 'got')).toHaveLength(1);
  });

  it('re-awaiting with presented signals parks (no spin) until a new one arrives', async () => {
    const id = await t.engine.insert(PackFsm, { state: { seenCount: 0 } });
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ id }, 'a', { part: 'a' });
    await eventually(
      async () => runsOf(id, 'collect').length === 1 && (await status(id)) === 'awaiting_signal',
    );
    // Parked on a set whose only inbox member was presented: it must stay parked.
    const picks = t.statements.length;
    await eventually(
      async () => t.statements.slice(picks).filter((s) => s === 'claim_runnable').length >= 3,
    );
    expect(await status(id)).toBe('awaiting_signal');
    expect(runsOf(id, 'collect')).toHaveLength(1);

    await t.engine.signal({ id }, 'b', { part: 'b' });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { complete: true },
    });
    const runs = runsOf(id, 'collect');
    expect(runs).toHaveLength(2);
    expect(runs[0]!.awaited.map((s) => s.name)).toEqual(['a']);
    expect(runs[1]!.awaited.map((s) => s.name)).toEqual(['a', 'b']);
    expect((await inbox(id)).every((s) => s.consumed)).toBe(true);
  });

  it('progressing consumes exactly the presented signals; a latecomer survives for the next await', async () => {
    const id = await t.engine.insert(LatecomerFsm);
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ id }, 'x', { n: 1 });
    await eventually(async () => gate(id).entered);
    // The step is executing and holds x#1; x#2 arrives meanwhile.
    await t.engine.signal({ id }, 'x', { n: 2 });
    gate(id).open();
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { payloads: [{ n: 2 }] },
    });

    const [work, again, end] = [
      runsOf(id, 'work')[0]!,
      runsOf(id, 'again')[0]!,
      runsOf(id, 'end')[0]!,
    ];
    expect(work.awaited.map((s) => s.payload)).toEqual([{ n: 1 }]);
    // `again` ran after next committed: x#1 was consumed, x#2 (never presented) was not.
    expect(again.all).toHaveLength(1);
    expect(again.all[0]!.id).not.toBe(work.awaited[0]!.id);
    expect(end.awaited.map((s) => s.payload)).toEqual([{ n: 2 }]);
    expect((await inbox(id)).map((s) => s.consumed)).toEqual([true, true]);
  });

  it('a terminal outcome consumes the whole inbox, awaited or not (done and stop)', async () => {
    for (const failWith of [undefined, 'declined']) {
      const id = await t.engine.insert(WaitOnceFsm, { state: failWith ? { failWith } : {} });
      await eventually(async () => (await status(id)) === 'awaiting_signal');
      await t.engine.signal({ id }, 'noise', { n: 1 });
      await t.engine.signal({ id }, 'other', { n: 2 });
      expect(await status(id)).toBe('awaiting_signal');
      await t.engine.signal({ id }, 'go', { n: 3 });
      const result = await t.engine.await(id, { until: 'terminal' });
      expect(result.kind).toBe(failWith ? 'failed' : 'done');
      const rows = await inbox(id);
      expect(rows.map((s) => s.name)).toEqual(['noise', 'other', 'go']);
      expect(rows.every((s) => s.consumed)).toBe(true);
      expect(runsOf(id, 'got')[0]!.all.map((s) => s.name)).toEqual(['noise', 'other', 'go']);
    }
  });

  it('a retry (and an onError retry) re-sees the same awaited signals; nothing is consumed until progress', async () => {
    const id = await t.engine.insert(RetrierFsm);
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ id }, 'go', { once: true });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { attempts: 3 },
    });
    const runs = runsOf(id, 'flaky');
    expect(runs.map((r) => r.attempt)).toEqual([0, 1, 2]);
    const ids = runs.map((r) => r.awaited.map((s) => s.id));
    expect(ids[0]).toHaveLength(1);
    expect(ids[1]).toEqual(ids[0]);
    expect(ids[2]).toEqual(ids[0]);
  });

  it('dedup holds for the instance life, even after the signal was consumed', async () => {
    const id = await t.engine.insert(LooperFsm, { state: { n: 0 } });
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ id }, 'ping', { k: 1 }, { dedupKey: 'hook-1' });
    await eventually(
      async () => runsOf(id, 'pong').length === 1 && (await status(id)) === 'awaiting_signal',
    );
    expect(await inbox(id)).toEqual([
      expect.objectContaining({ dedup_key: 'hook-1', consumed: true }),
    ]);

    // The webhook retries: success, nothing stored, nothing woken.
    await t.engine.signal({ id }, 'ping', { k: 1 }, { dedupKey: 'hook-1' });
    expect(await status(id)).toBe('awaiting_signal');
    expect(await inbox(id)).toHaveLength(1);
    const picks = t.statements.length;
    await eventually(
      async () => t.statements.slice(picks).filter((s) => s === 'claim_runnable').length >= 3,
    );
    expect(runsOf(id, 'pong')).toHaveLength(1);

    await t.engine.signal({ id }, 'ping', { k: 2 }, { dedupKey: 'hook-2' });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { rounds: 2 },
    });
    expect(runsOf(id, 'pong').map((r) => r.awaited.map((s) => s.payload))).toEqual([
      [{ k: 1 }],
      [{ k: 2 }],
    ]);
  });

  it('a duplicate dedup key on an unconsumed signal answers success and wakes nothing extra', async () => {
    const id = await t.engine.insert(WaitOnceFsm, { state: { names: ['go'] }, scheduleIn: 60_000 });
    await t.engine.signal({ id }, 'go', { n: 1 }, { dedupKey: 'd' });
    await t.engine.signal({ id }, 'go', { n: 2 }, { dedupKey: 'd' });
    await t.engine.signal({ id }, 'go', { n: 3 });
    expect((await inbox(id)).map((s) => s.dedup_key)).toEqual(['d', null]);
  });

  it('NoTargetError for missing, future, terminal and freed targets; nothing is stored', async () => {
    await expect(t.engine.signal({ id: '987654321' }, 'go')).rejects.toBeInstanceOf(NoTargetError);
    await expect(t.engine.signal({ correlationKey: 'order:future' }, 'go')).rejects.toBeInstanceOf(
      NoTargetError,
    );

    const id = await t.engine.insert(WaitOnceFsm, { correlationKey: 'order:freed' });
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ correlationKey: 'order:freed' }, 'go', { n: 1 });
    expect(await t.engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'done' });
    const before = (await inbox(id)).length;
    // Terminal by id; the default scope freed the key at termination.
    await expect(t.engine.signal({ id }, 'go')).rejects.toBeInstanceOf(NoTargetError);
    await expect(t.engine.signal({ correlationKey: 'order:freed' }, 'go')).rejects.toBeInstanceOf(
      NoTargetError,
    );
    await expect(t.engine.signal({ id }, 'go', {}, { dedupKey: 'late' })).rejects.toBeInstanceOf(
      NoTargetError,
    );
    expect(await inbox(id)).toHaveLength(before);
    const { rows } = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM gen_durable_signals WHERE target_id = 987654321`,
    );
    expect(rows[0]!.n).toBe('0');
  });

  it('a signal inside the caller transaction commits or rolls back with it', async () => {
    const ds = await db.dataSource();
    const id = await t.engine.insert(WaitOnceFsm);
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await expect(
      ds.transaction(async (manager) => {
        await t.engine.signal({ id }, 'go', { n: 'rolled back' }, { manager });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await inbox(id)).toHaveLength(0);
    expect(await status(id)).toBe('awaiting_signal');
    await ds.transaction((manager) => t.engine.signal({ id }, 'go', { n: 'kept' }, { manager }));
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { payloads: [{ n: 'kept' }] },
    });
  });

  it('a delivery that wakes a row pokes its queue: no poll needed', async () => {
    // A second engine whose only poll after boot is a minute away: only pokes can start work.
    const slow = await bootEngine(db, [WaitOnceFsm], {
      name: 'Poked',
      queues: { poked: 2 },
      pollInterval: 60_000,
      maxPollInterval: 60_000,
      reaper: false,
      gc: false,
    });
    try {
      const id = await slow.engine.insert(WaitOnceFsm, { queue: 'poked' });
      await eventually(async () => (await slow.engine.get({ id }))?.status === 'awaiting_signal');
      await slow.engine.signal({ id }, 'go', { poked: true });
      expect(await slow.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { payloads: [{ poked: true }] },
      });
    } finally {
      await slow.close();
    }
  });

  it('a timeout wakes a fresh await with an empty awaited at attempt 0 and emits await:timeout', async () => {
    const timeoutEvent = firstValueFrom(
      t.engine.events$.pipe(filter((e) => e.event === 'await:timeout')),
    );
    const id = await t.engine.insert(WaitOnceFsm, { state: { timeout: 300 } });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { payloads: [] },
    });
    const [got] = runsOf(id, 'got');
    expect(got).toMatchObject({ attempt: 0, awaited: [] });
    expect((await timeoutEvent).measurements['count']).toBeGreaterThanOrEqual(1);
  });

  it('a timeout on a pack wakes with the partial pack (awaits kept)', async () => {
    const id = await t.engine.insert(PackFsm, { state: { seenCount: 0, timeout: 300 } });
    await eventually(async () => (await status(id)) === 'awaiting_signal');
    await t.engine.signal({ id }, 'b', { part: 'b' });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { complete: false, partial: ['b'] },
    });
    const runs = runsOf(id, 'collect');
    expect(runs).toHaveLength(2);
    expect(runs[1]).toMatchObject({
      attempt: 0,
      awaited: [expect.objectContaining({ name: 'b' })],
    });
  });

  it('the deadline sweep keeps awaits and attempt, clears the deadline and makes the row due now', async () => {
    // A row of a queue no scheduler runs, claimed and parked through the production claim and flusher.
    const session = await openRawSession(db);
    try {
      const id = await t.engine.insert(PackFsm, { queue: 'manual', state: { seenCount: 0 } });
      const [claim] = await claimOn(session, 'manual', 'test-worker');
      expect(claim!.id).toBe(id);
      const row = claim!;
      expect(
        await submitTogether(t.engine, [
          flushEntry(t.engine, row, awaitSignal(['a', 'b'], 'collect', {}, { timeout: 1 })),
        ]),
      ).toEqual(['committed']);
      // Stand-in for earlier reaps: the sweep must neither reset nor bump the attempt.
      await db.pool.query(`UPDATE gen_durable SET attempt = 3 WHERE id = $1`, [id]);
      await eventually(async () => {
        await t.engine.runtime.reaper!.sweep();
        return (await status(id)) === 'runnable';
      });
      const view = await t.engine.get({ id });
      expect(view).toMatchObject({
        status: 'runnable',
        step: 'collect',
        attempt: 3,
        awaits: ['a', 'b'],
        awaitDeadline: null,
      });
      expect(view!.eligibleAt.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    } finally {
      await session.close();
    }
  });
});
