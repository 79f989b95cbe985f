import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.3: a row cancelled while parked on signals is parked again by `retry`
// (and `retryAll`), awaiting the same signals with its timeout re-armed from the retry; a
// `step` still overrides. The reaper is off: only the local await-deadline timer fires a
// timeout here, so a timeout that fires proves the retry armed it.

type OrderState = { order: string; timeout?: number };

@DurableFsm({ name: 'parked-order' })
class ParkedOrderFsm {
  @Step() start(ctx: StepContext<OrderState>) {
    return awaitSignal(
      'paid',
      'ship',
      ctx.state,
      ctx.state.timeout ? { timeout: ctx.state.timeout } : {},
    );
  }
  @Step() ship(ctx: StepContext<OrderState>) {
    return done({ order: ctx.state.order, paid: ctx.awaited.map((s) => s.payload) });
  }
  @Step() refund(ctx: StepContext<OrderState>) {
    return done({ order: ctx.state.order, refunded: true });
  }
}

describe('retry of an instance that ended parked (docs/design.md §27.3)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ParkedOrderFsm], { reaper: false, gc: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** An order parked on `paid`, then cancelled. */
  async function cancelledWhileParked(state: OrderState, correlationKey?: string): Promise<string> {
    const id = await h.engine.insert(ParkedOrderFsm, {
      state,
      ...(correlationKey ? { correlationKey } : {}),
    });
    expect(await h.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'awaiting' });
    await h.engine.cancel(id, { reason: 'customer asked' });
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', step: 'ship' });
    return id;
  }

  it('parks it again on the same signal; the signal then runs the step after the wait', async () => {
    const id = await cancelledWhileParked({ order: 'ord-a' });
    await h.engine.retry(id);
    const row = await rowOf(db, id);
    expect(row).toMatchObject({
      status: 'awaiting_signal',
      step: 'ship',
      awaits: ['paid'],
      await_deadline: null,
      cancel_requested_at: null,
    });
    // Still parked a while later: nothing ran the step after the wait.
    await new Promise((r) => setTimeout(r, 300));
    expect(await rowOf(db, id)).toMatchObject({ status: 'awaiting_signal' });
    // The FSM graph counts it at the step it waits to run.
    expect((await h.engine.stepCounts('parked-order'))['ship']).toMatchObject({ count: 1 });
    await h.engine.signal(id, 'paid', { amount: 12 });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { order: 'ord-a', paid: [{ amount: 12 }] },
    });
    const history = await h.engine.history(id);
    expect(history.find((e) => e.kind === 'manual.retry')).toMatchObject({
      step: 'ship',
      nextStep: 'ship',
      outcome: 'awaiting_signal',
    });
  });

  it('re-arms its timeout from the retry with the original duration, and it fires', async () => {
    // Parked with a long timeout, so that nothing but the cancel can end the park however
    // slow the machine is; the cancelled row is then given the deadline a 1.5 s park made
    // 1.7 s ago would have left (passed 0.2 s ago). The cancelled row keeps the deadline it
    // had, so the original duration (deadline − park time) can be re-armed.
    const id = await cancelledWhileParked({ order: 'ord-b', timeout: 60_000 });
    await db.pool.query(
      `UPDATE gen_durable SET eligible_at = now() - interval '1700 ms',
                              await_deadline = now() - interval '200 ms'
        WHERE id = $1`,
      [id],
    );
    const before = Date.now();
    await h.engine.retry(id);
    const row = await rowOf(db, id);
    expect(row['status']).toBe('awaiting_signal');
    const deadline = (row['await_deadline'] as Date).getTime();
    expect(deadline).toBeGreaterThanOrEqual(before + 1_500 - 50);
    expect(deadline).toBeLessThanOrEqual(Date.now() + 1_500 + 50);
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { order: 'ord-b', paid: [] },
    });
    expect(Date.now()).toBeGreaterThanOrEqual(before + 1_400);
  });

  it('a step still overrides: it runs that step, nothing awaited', async () => {
    const id = await cancelledWhileParked({ order: 'ord-c', timeout: 60_000 });
    await h.engine.retry(id, { step: 'refund' });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { order: 'ord-c', refunded: true },
    });
    expect(await rowOf(db, id)).toMatchObject({ awaits: null, await_deadline: null });
  });

  it('retryAll parks each such row again', async () => {
    const a = await cancelledWhileParked({ order: 'ord-d1' }, 'bulk:d1');
    const b = await cancelledWhileParked({ order: 'ord-d2', timeout: 60_000 }, 'bulk:d2');
    expect(
      await h.engine.retryAll({
        fsm: 'parked-order',
        status: 'cancelled',
        correlationKeyPrefix: 'bulk:',
      }),
    ).toMatchObject({ matched: 2, changed: 2 });
    expect(await rowOf(db, a)).toMatchObject({ status: 'awaiting_signal', awaits: ['paid'] });
    const rowB = await rowOf(db, b);
    expect(rowB).toMatchObject({ status: 'awaiting_signal', awaits: ['paid'] });
    expect((rowB['await_deadline'] as Date).getTime()).toBeGreaterThan(Date.now() + 50_000);
    await h.engine.signal(b, 'paid', 'ok');
    expect(await h.engine.await(b, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { order: 'ord-d2', paid: ['ok'] },
    });
    expect(await rowOf(db, a)).toMatchObject({ status: 'awaiting_signal' });
  });

  it('a matching signal already in its inbox makes it runnable at once, as a park would', async () => {
    const id = await cancelledWhileParked({ order: 'ord-e' });
    // A cancel consumes the inbox and a cancelled row takes no signal: put one there by hand.
    await db.pool.query(
      `INSERT INTO gen_durable_signals (target_id, name, payload) VALUES ($1, 'paid', '"early"')`,
      [id],
    );
    await h.engine.retry(id);
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { order: 'ord-e', paid: ['early'] },
    });
  });

  it('a row cancelled while not parked keeps the old retry: it runs its step', async () => {
    const id = await h.engine.insert(ParkedOrderFsm, {
      state: { order: 'ord-f' },
      scheduleAt: new Date(Date.now() + 3_600_000),
    });
    await h.engine.cancel(id);
    await h.engine.retry(id);
    // Runnable and due at once: a scheduler may already have claimed it, so the row is not
    // read here. Its retry's record says it went back to its step, and that step ran: it
    // parked on `paid` anew.
    const history = await h.engine.history(id);
    expect(history.find((e) => e.kind === 'manual.retry')).toMatchObject({
      step: 'start',
      nextStep: 'start',
      outcome: 'runnable',
    });
    expect(await h.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'awaiting' });
    expect(await rowOf(db, id)).toMatchObject({ status: 'awaiting_signal', step: 'ship' });
  });
});
