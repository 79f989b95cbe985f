import { settleWithin } from '../../lib/util/settle-within';

// settleWithin (lib/util/settle-within.ts): the deadline of the health checks' queries and of
// the poke listener's connect. Real timers, short deadlines.

const late = (ms: number) => new Error(`late after ${ms} ms`);

/** A promise and the functions that settle it. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('settleWithin', () => {
  it("answers the work's value when it settles in time", async () => {
    await expect(settleWithin(Promise.resolve(42), 1_000, () => late(1_000))).resolves.toBe(42);
  });

  it("rejects with the work's own error when it fails in time", async () => {
    const work = Promise.reject(new Error('connection refused'));
    await expect(settleWithin(work, 1_000, () => late(1_000))).rejects.toThrow(
      'connection refused',
    );
  });

  it("rejects with timedOut()'s error once the deadline passes, not waiting for the work", async () => {
    const work = deferred<number>();
    const started = Date.now();
    await expect(settleWithin(work.promise, 50, () => late(50))).rejects.toThrow(
      'late after 50 ms',
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    work.resolve(1); // a late value changes nothing
  });

  it('leaves no unhandled rejection when the work fails after the deadline', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const work = deferred<number>();
      await expect(settleWithin(work.promise, 20, () => late(20))).rejects.toThrow('late');
      work.reject(new Error('failed after the deadline'));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
