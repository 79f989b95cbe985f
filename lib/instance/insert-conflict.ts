import { InvalidInputError } from '../errors/invalid-input.error';
import type { InsertOptions } from '../fsm/insert-options.interface';
import { MAX_DELAY_MS } from '../fsm/outcome';

/**
 * What an insert does with an occupied correlation key (docs/identity.md "Conflict modes"),
 * checked: `onConflict` with its `debounceMs` / `maxDelayMs`.
 */
export type InsertConflict =
  | { readonly mode: 'error' }
  | { readonly mode: 'skip' }
  | { readonly mode: 'replace' }
  | { readonly mode: 'debounce'; readonly debounceMs: number; readonly maxDelayMs: number | null };

const MODES: readonly string[] = ['error', 'return', 'skip', 'debounce', 'replace'];

/** An integer number of ms in `min` … MAX_DELAY_MS, or `InvalidInputError` naming `path`. */
export function delayMs(value: unknown, min: number, path: string): number {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < min ||
    value > MAX_DELAY_MS
  ) {
    throw new InvalidInputError(
      path,
      `must be an integer number of ms in ${min} … ${MAX_DELAY_MS}, got ${String(value)}`,
    );
  }
  return value;
}

/**
 * The checked conflict mode of `insert` options (`path` names the fields). `'return'` is
 * `'skip'`. `debounceMs` is required by and only taken with `'debounce'`, which takes no start
 * time of its own (its start is the debounce); `maxDelayMs` is at least `debounceMs`.
 */
export function insertConflictOf(o: InsertOptions, path: string): InsertConflict {
  const mode = o.onConflict ?? 'error';
  if (!MODES.includes(mode)) {
    throw new InvalidInputError(`${path}.onConflict`, `must be one of ${MODES.join(', ')}`);
  }
  if (mode !== 'debounce') {
    if (o.debounceMs !== undefined || o.maxDelayMs !== undefined) {
      throw new InvalidInputError(
        `${path}.${o.debounceMs !== undefined ? 'debounceMs' : 'maxDelayMs'}`,
        "is taken only with onConflict: 'debounce'",
      );
    }
    return mode === 'return' ? { mode: 'skip' } : { mode };
  }
  if (o.debounceMs === undefined) {
    throw new InvalidInputError(`${path}.debounceMs`, "is required with onConflict: 'debounce'");
  }
  const debounceMs = delayMs(o.debounceMs, 1, `${path}.debounceMs`);
  const maxDelayMs =
    o.maxDelayMs === undefined ? null : delayMs(o.maxDelayMs, debounceMs, `${path}.maxDelayMs`);
  for (const field of ['eligibleAt', 'scheduleAt', 'scheduleIn'] as const) {
    if (o[field] !== undefined) {
      throw new InvalidInputError(
        `${path}.${field}`,
        "is not taken with onConflict: 'debounce' (the start is now + debounceMs)",
      );
    }
  }
  return { mode, debounceMs, maxDelayMs };
}
