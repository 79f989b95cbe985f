const JOB_RESULTS = new WeakSet<object>();

export type JobResult = { readonly kind: 'jobError' | 'cancel'; readonly reason: unknown };

function brand(result: JobResult): JobResult {
  JOB_RESULTS.add(result);
  return Object.freeze(result);
}

/** A job's failure: retried with backoff until `maxAttempts`, then stopped (docs/design.md §13). */
export function jobError(reason: unknown): JobResult {
  return brand({ kind: 'jobError', reason });
}

/** Stops a job at once with `reason`, attempt unchanged (docs/design.md §13). */
export function cancel(reason: unknown): JobResult {
  return brand({ kind: 'cancel', reason });
}

export function isJobResult(value: unknown): value is JobResult {
  return typeof value === 'object' && value !== null && JOB_RESULTS.has(value);
}
