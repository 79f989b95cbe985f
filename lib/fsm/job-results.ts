const JOB_RESULT = Symbol('gen-durable:job-result');

export type JobResult = { readonly kind: 'jobError' | 'cancel'; readonly reason: unknown };

function brand(result: JobResult): JobResult {
  Object.defineProperty(result, JOB_RESULT, { value: true, enumerable: false });
  return Object.freeze(result);
}

/** A job's failure: retried with backoff until `maxAttempts`, then stopped (SPEC §13). */
export function jobError(reason: unknown): JobResult {
  return brand({ kind: 'jobError', reason });
}

/** Stops a job at once with `reason`, attempt unchanged (SPEC §13). */
export function cancel(reason: unknown): JobResult {
  return brand({ kind: 'cancel', reason });
}

export function isJobResult(value: unknown): value is JobResult {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[JOB_RESULT] === true;
}
