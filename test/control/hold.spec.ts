import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { bootEngine, eventually, type Harness, rowOf, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Hold and release one instance (docs/operations-control.md "Hold and release"): a held
// instance is never claimed, still takes signals, and runs once released; cancel and retry
// work on it; explain names the hold.

const finished = new Map<string, number>();

@DurableFsm({ name: 'holdable', queue: 'hold-q' })
class ParkFsm {
  @Step() start(ctx: StepContext<{ park?: boolean }>) {
    return ctx.state.park ? awaitSignal('go', 'finish', ctx.state) : done({ ran: 'start' });
  }
  @Step() finish(ctx: StepContext) {
    finished.set(ctx.id, (finished.get(ctx.id) ?? 0) + 1);
    return done({ ran: 'finish' });
  }
}

describe('hold and release (docs/operations-control.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ParkFsm], { queues: { 'hold-q': 2 } });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const status = async (id: string) => (await h.engine.get(id))?.status;
  const parked = (id: string) => eventually(async () => (await status(id)) === 'awaiting_signal');

  it('insert({ held: true }) is never claimed until released; explain names the hold', async () => {
    const id = await h.engine.insert(ParkFsm, { held: true });
    await sleep(300); // several polls of a served queue
    const row = await h.engine.get(id);
    expect(row).toMatchObject({ status: 'runnable', claimSeq: '0', heldReason: null });
    expect(row?.heldAt).toBeInstanceOf(Date);
    const why = await h.engine.explain(id);
    expect(why.reasons[0]).toMatchObject({ code: 'held', blocking: true });
    expect(await h.engine.release(id)).toEqual({ id, changed: true });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { ran: 'start' },
    });
    expect(await h.engine.release(id)).toEqual({ id, changed: false });
  });

  it('a held parked instance stores a signal and wakes, but runs only once released', async () => {
    const id = await h.engine.insert(ParkFsm, { state: { park: true }, correlationKey: 'hold-1' });
    await parked(id);
    expect(await h.engine.hold({ correlationKey: 'hold-1' }, { reason: 'audit' })).toEqual({
      id,
      changed: true,
    });
    expect(await h.engine.hold(id)).toEqual({ id, changed: false });
    expect((await h.engine.get(id))?.heldReason).toBe('audit');
    await h.engine.signal(id, 'go', {});
    await eventually(async () => (await status(id)) === 'runnable');
    await sleep(300);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'finish' });
    expect(finished.get(id)).toBeUndefined();
    await h.engine.release(id);
    await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(finished.get(id)).toBe(1);
  });

  it('release racing a signal: the signal is stored and the instance runs once', async () => {
    for (let round = 0; round < 5; round++) {
      const id = await h.engine.insert(ParkFsm, { state: { park: true } });
      await parked(id);
      await h.engine.hold(id);
      await Promise.all([h.engine.signal(id, 'go', { round }), h.engine.release(id)]);
      expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { ran: 'finish' },
      });
      expect(finished.get(id)).toBe(1);
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NOT NULL`,
        [id],
      );
      expect(rows[0]).toEqual({ n: 1 });
    }
  });

  it('release waiting on an uncommitted signal: the signal is stored and the instance runs once', async () => {
    const id = await h.engine.insert(ParkFsm, { state: { park: true } });
    await parked(id);
    await h.engine.hold(id);
    const runner = (await db.dataSource()).createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      // The delivery locks the row, stores the signal and wakes it, uncommitted.
      await h.engine.signal(id, 'go', { ordered: true }, { manager: runner.manager });
      const released = h.engine.release(id);
      await eventually(async () => {
        const { rows } = await db.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows.length > 0;
      });
      expect(finished.get(id)).toBeUndefined();
      await runner.commitTransaction();
      expect(await released).toEqual({ id, changed: true });
    } finally {
      await runner.release();
    }
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { ran: 'finish' },
    });
    expect(finished.get(id)).toBe(1);
  });

  it('cancel and retry work on a held instance; retry clears the hold', async () => {
    const id = await h.engine.insert(ParkFsm, { held: true });
    expect((await h.engine.cancel(id)).cancelled).toEqual([id]);
    expect(await status(id)).toBe('cancelled');
    await expect(h.engine.hold(id)).rejects.toThrow(InvalidInputError);
    await h.engine.retry(id);
    expect((await h.engine.get(id))?.heldAt).toBeNull();
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
  });

  it('the client holds, releases and inserts held and debounced, as the engine does', async () => {
    const client = new GenDurableClient(db.pool);
    try {
      const id = await client.insert('holdable', { step: 'start', queue: 'hold-q', held: true });
      expect((await client.get(id))?.heldAt).toBeInstanceOf(Date);
      expect((await client.explain(id)).reasons[0]?.code).toBe('held');
      expect(await client.hold(id, { reason: 'again' })).toEqual({ id, changed: false });
      expect(await client.release(id)).toEqual({ id, changed: true });
      expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
        kind: 'done',
      });
      const first = await client.insert('holdable', {
        step: 'start',
        queue: 'hold-q',
        correlationKey: 'client-deb',
        state: { v: 1 },
        onConflict: 'debounce',
        debounceMs: 600_000,
      });
      expect(
        await client.insert('holdable', {
          step: 'start',
          queue: 'hold-q',
          correlationKey: 'client-deb',
          state: { v: 2 },
          onConflict: 'debounce',
          debounceMs: 600_000,
        }),
      ).toBe(first);
      expect((await client.get(first))?.state).toEqual({ v: 2 });
      await client.cancel(first);
    } finally {
      await client.close();
    }
  });

  it('hold and release write history rows with their actor and reason (docs/design.md §28.1)', async () => {
    const id = await h.engine.insert(ParkFsm, { state: { park: true } });
    await parked(id);
    await h.engine.hold(id, { reason: 'fraud review', actor: 'alice' });
    await h.engine.hold(id); // already held, no reason: nothing new to record
    await h.engine.hold(id, { reason: 'still reviewing', actor: 'bob' });
    await h.engine.release(id, { actor: 'carol', reason: 'cleared' });
    await h.engine.release(id, { actor: 'carol' }); // not held: nothing to record
    const rows = (await h.engine.history(id)).filter((e) => e.kind.startsWith('manual.'));
    expect(
      rows.reverse().map((e) => ({
        kind: e.kind,
        step: e.step,
        outcome: e.outcome,
        actor: e.actor,
        reason: e.error?.message ?? null,
      })),
    ).toEqual([
      {
        kind: 'manual.hold',
        step: 'finish',
        outcome: 'held',
        actor: 'alice',
        reason: 'fraud review',
      },
      {
        kind: 'manual.hold',
        step: 'finish',
        outcome: 'held',
        actor: 'bob',
        reason: 'still reviewing',
      },
      {
        kind: 'manual.release',
        step: 'finish',
        outcome: 'released',
        actor: 'carol',
        reason: 'cleared',
      },
    ]);
    expect(rows[0]?.error).toEqual({ name: 'reason', message: 'fraud review', stack: null });
    await expect(h.engine.hold(id, { actor: '' })).rejects.toThrow(InvalidInputError);
    await expect(
      h.engine.release(id, { who: 'x' } as unknown as { actor: string }),
    ).rejects.toThrow(InvalidInputError);
    await h.engine.cancel(id);
  });

  it('refuses a missing target and bad options', async () => {
    await expect(h.engine.hold('999999999')).rejects.toThrow(NoTargetError);
    await expect(h.engine.release('999999999')).rejects.toThrow(NoTargetError);
    const id = await h.engine.insert(ParkFsm, { held: true });
    await expect(h.engine.hold(id, { reason: 5 as unknown as string })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.insert(ParkFsm, { held: 'yes' as unknown as boolean })).rejects.toThrow(
      InvalidInputError,
    );
    await h.engine.cancel(id);
  });
});
