import { LeaseLostError, StepTimeoutError, stepAbortReason } from '../../lib';
import { StepRun } from '../../lib/runtime/step-run';

// docs/design.md §27.5: one running step's ctx.signal and deadline.

const ROW = { id: '7', fsm: 'f', step: 's', claimSeq: '3' };

describe('StepRun', () => {
  it('makes the signal on first read; an abort before that hands out an aborted signal', () => {
    const run = new StepRun(ROW, undefined);
    const lost = new LeaseLostError('f', '7', 's');
    expect(run.abort(lost)).toBe(true);
    expect(run.signal.aborted).toBe(true);
    expect(stepAbortReason(run.signal)).toBe(lost);
    expect(stepAbortReason(run.signal)?.abortCause).toBe('lease-lost');
  });

  it('keeps the first reason', () => {
    const run = new StepRun(ROW, undefined);
    const signal = run.signal;
    expect(stepAbortReason(signal)).toBeUndefined();
    const first = new LeaseLostError('f', '7', 's');
    expect(run.abort(first)).toBe(true);
    expect(run.abort(new StepTimeoutError('f', '7', 's', 5))).toBe(false);
    expect(signal.reason).toBe(first);
  });

  it('without a timeout: settle passes the value through and nothing expires', () => {
    const run = new StepRun(ROW, undefined);
    run.start();
    const value = { kind: 'x' };
    expect(run.settle(value)).toBe(value);
    expect(run.expireNow()).toBe(false);
    expect(run.overdue()).toBeUndefined();
  });

  it('expireNow rejects the race with a StepTimeoutError and aborts the signal with it', async () => {
    const run = new StepRun(ROW, 60_000);
    run.start();
    const never = new Promise<never>(() => undefined);
    const raced = run.settle(never) as Promise<unknown>;
    expect(run.expireNow()).toBe(true);
    await expect(raced).rejects.toBeInstanceOf(StepTimeoutError);
    await expect(raced).rejects.toMatchObject({ timeoutMs: 60_000, step: 's', id: '7' });
    expect(stepAbortReason(run.signal)?.abortCause).toBe('timeout');
    expect(run.signal.reason).toBe(run.timedOut);
    expect(run.overdue()).toBe(run.timedOut);
    expect(run.expireNow()).toBe(false);
    run.end();
  });

  it('the deadline fires on its own, and a step that settles first wins', async () => {
    const slow = new StepRun(ROW, 20);
    slow.start();
    await expect(slow.settle(new Promise<never>(() => undefined))).rejects.toBeInstanceOf(
      StepTimeoutError,
    );
    const fast = new StepRun(ROW, 60_000);
    fast.start();
    await expect(fast.settle(Promise.resolve('ok'))).resolves.toBe('ok');
    expect(fast.overdue()).toBeUndefined();
    fast.end();
    expect(fast.expireNow()).toBe(false);
    expect(fast.signal.aborted).toBe(false);
  });

  it('a step that blocked the event loop past its timeout is overdue when it returns', () => {
    const run = new StepRun(ROW, 5);
    run.start();
    const until = performance.now() + 15;
    while (performance.now() < until) {
      // blocks: the timer gets no turn
    }
    expect(run.settle('value')).toBeInstanceOf(Promise);
    expect(run.overdue()).toBeInstanceOf(StepTimeoutError);
    expect(run.timedOut).toBeInstanceOf(StepTimeoutError);
    run.end();
  });
});
