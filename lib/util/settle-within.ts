/**
 * `work`'s outcome, or a rejection with `timedOut()`'s error when `work` has not settled within
 * `ms` (the deadline is an `AbortSignal.timeout`). For work that takes no AbortSignal — a pg
 * query, a pg connect: the work is not stopped, only no longer awaited; its late value is
 * dropped and its late rejection is handled (no unhandled rejection). The deadline's timer does
 * not keep the process alive (`AbortSignal.timeout`'s is unref'd); the work's own socket does.
 */
export function settleWithin<T>(work: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  const deadline = AbortSignal.timeout(ms);
  return new Promise<T>((resolve, reject) => {
    const onDeadline = (): void => reject(timedOut());
    deadline.addEventListener('abort', onDeadline, { once: true });
    // `then` with both handlers never rejects, so neither does `finally` here.
    void work.then(resolve, reject).finally(() => {
      deadline.removeEventListener('abort', onDeadline);
    });
  });
}
