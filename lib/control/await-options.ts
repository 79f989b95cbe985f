import { InvalidInputError } from '../errors/invalid-input.error';
import type { AwaitUntil } from '../instance/await-answer';

/** What `await` takes (docs/design.md §9), on every face. */
export interface AwaitInstanceOptions {
  /** How long to wait, in ms (default 5 000; 0: read once). At the deadline the answer is `busy`. */
  timeout?: number;
  /** `settled` (default): done, failed, cancelled or parked; `terminal`: done, failed or cancelled. */
  until?: AwaitUntil;
}

/** The default `await` timeout, in ms. */
const DEFAULT_AWAIT_TIMEOUT_MS = 5000;

/** `await`'s options checked, with their defaults: `InvalidInputError` naming the bad field. */
export function resolveAwaitOptions(options: AwaitInstanceOptions | undefined): {
  timeoutMs: number;
  until: AwaitUntil;
} {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new InvalidInputError('await.options', 'must be an object');
  }
  const timeoutMs = options?.timeout ?? DEFAULT_AWAIT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0) {
    throw new InvalidInputError('await.timeout', 'must be an integer ≥ 0 (ms)');
  }
  const until = options?.until ?? 'settled';
  if (until !== 'settled' && until !== 'terminal') {
    throw new InvalidInputError('await.until', "must be 'settled' or 'terminal'");
  }
  return { timeoutMs, until };
}
