import { ConfigurationError } from '../errors/configuration.error';
import { InvalidInputError } from '../errors/invalid-input.error';

/**
 * What a failed instance does to its sequence key (docs/sequences.md "When the head fails"):
 * `'block'` keeps the key held until the instance is retried, cancelled or purged; `'skip'`
 * lets the next instance of the key run once this one has failed (terminal). A head that waits
 * on a retry backoff is live and holds its key under either policy.
 */
export type OnHeadFailure = 'block' | 'skip';

/** The policies, in documentation order. */
export const HEAD_FAILURE_POLICIES: readonly OnHeadFailure[] = ['block', 'skip'];

/** The longest sequence key, in characters (a btree entry stays far below its page limit). */
export const MAX_SEQUENCE_KEY_LENGTH = 512;

/**
 * `@DurableFsm({ sequenceKey, onHeadFailure })` checked (docs/sequences.md): the FSM's default
 * key, computed from an insert's state when the insert names none, and its default policy.
 */
export interface FsmSequence {
  /** The default key as a function of the inserted state; null = none. */
  readonly key: ((state: Record<string, unknown>) => unknown) | null;
  /** The default policy of its inserts. */
  readonly onHeadFailure: OnHeadFailure;
}

/** A sequence key: a non-empty string of at most {@link MAX_SEQUENCE_KEY_LENGTH} characters. */
export function sequenceKeyText(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidInputError(path, `must be a non-empty string, got ${describe(value)}`);
  }
  if (value.length > MAX_SEQUENCE_KEY_LENGTH) {
    throw new InvalidInputError(
      path,
      `must be at most ${MAX_SEQUENCE_KEY_LENGTH} characters, got ${value.length}`,
    );
  }
  return value;
}

/** An `onHeadFailure` value of an insert. */
export function onHeadFailureOf(value: unknown, path: string): OnHeadFailure {
  if (value !== 'block' && value !== 'skip') {
    throw new InvalidInputError(path, `must be 'block' or 'skip', got ${describe(value)}`);
  }
  return value;
}

/** `@DurableFsm({ sequenceKey, onHeadFailure })` checked at boot; undefined when neither is declared. */
export function checkFsmSequence(
  meta: { sequenceKey?: unknown; onHeadFailure?: unknown },
  where: string,
): FsmSequence | undefined {
  if (meta.sequenceKey === undefined && meta.onHeadFailure === undefined) return undefined;
  if (meta.sequenceKey !== undefined && typeof meta.sequenceKey !== 'function') {
    throw new ConfigurationError(
      `${where}.sequenceKey`,
      `must be a function of the state that returns the key (or undefined for none), got ${describe(meta.sequenceKey)}`,
    );
  }
  const policy = meta.onHeadFailure ?? 'block';
  if (policy !== 'block' && policy !== 'skip') {
    throw new ConfigurationError(
      `${where}.onHeadFailure`,
      `must be 'block' or 'skip', got ${describe(policy)}`,
    );
  }
  return {
    key: (meta.sequenceKey as ((state: Record<string, unknown>) => unknown) | undefined) ?? null,
    onHeadFailure: policy,
  };
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : typeof value;
}
