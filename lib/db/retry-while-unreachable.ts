import { isConnectionLevel } from './error-class';

/** How `retryWhileUnreachable` waits and for how long. */
export interface UnreachableRetryPolicy {
  /** Total time the database may stay unreachable, ms; past it the last error is thrown. */
  readonly timeoutMs: number;
  /** First pause between tries, ms; it doubles up to `maxPauseMs`. */
  readonly firstPauseMs?: number;
  readonly maxPauseMs?: number;
  /** Told once per failed try that will be retried (a log line). */
  readonly onRetry?: (what: string, err: unknown, elapsedMs: number) => void;
}

/**
 * Runs `fn`, and while it fails with a connection-level error (docs/design.md §26: the database
 * restarting, refusing connections, a reset link) runs it again after a growing pause, for up to
 * `timeoutMs` in all. Any other error — a missing schema, bad SQL, a constraint — is thrown at
 * once. For the engine's boot statements, each of which is idempotent, so a host's boot rides
 * out a database blip instead of failing (docs/operations.md, "Boot").
 */
export async function retryWhileUnreachable<T>(
  what: string,
  fn: () => Promise<T>,
  policy: UnreachableRetryPolicy,
): Promise<T> {
  const started = Date.now();
  let pause = policy.firstPauseMs ?? 100;
  const maxPause = policy.maxPauseMs ?? 2_000;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const elapsed = Date.now() - started;
      if (!isConnectionLevel(err) || elapsed + pause > policy.timeoutMs) throw err;
      policy.onRetry?.(what, err, elapsed);
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, maxPause);
    }
  }
}
