/** Whether `value` is a promise-like (has a `then` method), as `await` would treat it. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** Resolves once `pending` settles, whatever its value or rejection (which it handles). */
export function settledQuietly(pending: PromiseLike<unknown>): Promise<void> {
  return Promise.resolve(pending).then(ignore, ignore);
}

function ignore(): void {}
