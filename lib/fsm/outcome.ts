import { inspect } from 'node:util';

import type { Type } from '@nestjs/common';

import { isArray } from '../util/is-array';

import { InvalidOutcomeError } from '../errors/invalid-outcome.error';
import type { PublicOutcomeKind } from './outcome-kinds';
import type { InsertOptions } from './insert-options.interface';
import type { LimitKey } from './limit-key';

/** Outcomes built by this module; a WeakSet keeps the objects plain (no hidden property). */
const OUTCOMES = new WeakSet<object>();

export type { LimitKey };

export interface NextOptions {
  /** Rate limit of the next step. */
  rateLimit?: LimitKey;
  /** Tokens the next step takes (> 0). Default 1. */
  weight?: number;
  /** Absent = keep the key, `null` = release it, a key = switch to it. */
  concurrencyKey?: LimitKey | null;
  /** Overrides the FSM's `inlineExecution` for this transition. */
  inlineExecution?: boolean;
}

/** A child to spawn: an FSM class or name, or `{ fsm, ...InsertOptions }`. */
export type ChildSpec = Type<unknown> | string | ({ fsm: Type<unknown> | string } & InsertOptions);

export type Outcome =
  | {
      readonly kind: 'next';
      readonly step: string;
      readonly state: unknown;
      readonly options: Readonly<NextOptions>;
    }
  | { readonly kind: 'retry'; readonly state: unknown; readonly delayMs: number }
  | {
      readonly kind: 'throttle';
      /** The rate limit to close, when given. */
      readonly limit: LimitKey | undefined;
      /** The concurrency key to close, when given. */
      readonly key: LimitKey | undefined;
      readonly retryAfterMs: number;
    }
  | {
      readonly kind: 'sleep';
      readonly step: string;
      readonly state: unknown;
      /** `{ for }`: due this many ms after the commit (database clock); 0 with `until`. */
      readonly delayMs: number;
      /** `{ until }`: due at this instant; null with `for`. */
      readonly until: Date | null;
    }
  | {
      readonly kind: 'await';
      readonly names: readonly string[];
      readonly step: string;
      readonly state: unknown;
      readonly timeoutMs: number | undefined;
    }
  | {
      readonly kind: 'scheduleChildren';
      readonly step: string;
      readonly children: readonly ChildSpec[];
      readonly state: unknown;
    }
  | { readonly kind: 'done'; readonly result: Record<string, unknown> }
  | { readonly kind: 'stop'; readonly reason: string };

export type OutcomeKind = Outcome['kind'];

/**
 * The public union lists exactly the public kinds of the outcome table: a kind added to
 * OUTCOME_KINDS without its member here (or the reverse) fails compilation on this line.
 */
type SameKinds<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const publicKindsMatch: SameKinds<OutcomeKind, PublicOutcomeKind> = true;
void publicKindsMatch;

function brand<T extends Outcome>(outcome: T): T {
  OUTCOMES.add(outcome);
  return Object.freeze(outcome);
}

/** True for outcomes built by the functions of this module. */
export function isOutcome(value: unknown): value is Outcome {
  return typeof value === 'object' && value !== null && OUTCOMES.has(value);
}

function stepName(fn: string, step: unknown): string {
  if (typeof step !== 'string' || step.length === 0) {
    throw new InvalidOutcomeError(
      `${fn}(): the step must be a non-empty string, got ${String(step)}`,
    );
  }
  return step;
}

/** Continue with `step` and `state`. */
export function next<S>(step: string, state: S, options: NextOptions = {}): Outcome {
  if (
    options.weight !== undefined &&
    !(typeof options.weight === 'number' && Number.isFinite(options.weight) && options.weight > 0)
  ) {
    throw new InvalidOutcomeError(
      `next(): weight must be a finite number > 0, got ${String(options.weight)}`,
    );
  }
  return brand({
    kind: 'next',
    step: stepName('next', step),
    state,
    options: Object.freeze({ ...options }),
  });
}

/**
 * The longest `sleep({ for })` and `retry` delay, ms: 100 years (of 365.25 days). Far beyond
 * any real wait, and far inside PostgreSQL's interval and timestamp ranges, which a longer
 * delay could leave (failing the whole group commit it joined: `timestamp out of range`).
 */
export const MAX_DELAY_MS = 3_155_760_000_000;

/**
 * Run the same step again after `delayMs` (integer 0 … {@link MAX_DELAY_MS}), with
 * `attempt + 1`. A longer delay would leave PostgreSQL's timestamp range and fail the group
 * commit it joined (every outcome in it), so it is refused here.
 */
export function retry<S>(state: S, delayMs = 0): Outcome {
  if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
    throw new InvalidOutcomeError(
      `retry(): delayMs must be an integer in 0 … ${MAX_DELAY_MS}, got ${String(delayMs)}`,
    );
  }
  return brand({ kind: 'retry', state, delayMs });
}

/** What `throttle()` closes and for how long (docs/rate-limiting.md, "Backing off on 429"). */
export interface ThrottleOptions {
  /** A configured rate limit (its name, or `[name, partition]` for one partition's bucket). */
  readonly limit?: LimitKey;
  /** A concurrency key whose name is a configured concurrency limit. */
  readonly key?: LimitKey;
  /** How long the limit stays closed and the row waits, ms (integer 1 … `MAX_DELAY_MS`, 100 years). */
  readonly retryAfterMs: number;
}

/**
 * Back off on a 429 (docs/design.md §16.5): closes the rate limit `limit` and/or the
 * concurrency key `key` cluster-wide for `retryAfterMs` — no node admits a row of it until
 * then — and runs the same step again after it with the state it had and the attempt
 * unchanged (no attempt is spent). The names must be configured (checked when the outcome is
 * committed: an unknown one is an `InvalidInputError`, routed to `onError`).
 */
export function throttle(options: ThrottleOptions): Outcome {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOutcomeError(
      `throttle(): options must be { limit | key, retryAfterMs }, got ${String(options)}`,
    );
  }
  const ms: unknown = options.retryAfterMs;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_DELAY_MS) {
    throw new InvalidOutcomeError(
      `throttle(): retryAfterMs must be an integer in 1 … ${MAX_DELAY_MS}, got ${String(ms)}`,
    );
  }
  if (options.limit === undefined && options.key === undefined) {
    throw new InvalidOutcomeError('throttle(): give a limit, a key or both');
  }
  return brand({ kind: 'throttle', limit: options.limit, key: options.key, retryAfterMs: ms });
}

/** How long a `sleep` lasts: `{ for: ms }` from its commit, or `{ until: Date }`. */
export type SleepDuration =
  | { readonly for: number; readonly until?: undefined }
  | { readonly until: Date; readonly for?: undefined };

/** `sleep({ until })` bounds: years 1 … 9999, inside PostgreSQL's timestamptz range. */
// Date.UTC maps years 0 … 99 to 1900 … 1999: set the year explicitly.
export const MIN_UNTIL_MS = new Date(0).setUTCFullYear(1, 0, 1);
export const MAX_UNTIL_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * Run `nextStep` with `state` later, without holding anything meanwhile (docs/design.md
 * §27.4): the row is runnable again at `{ for: ms }` after the commit (database clock,
 * integer 0 … {@link MAX_DELAY_MS}) or at `{ until: Date }` (years 1 … 9999; a past instant is
 * due at once). Unlike `retry`, the attempt counter restarts at 0. Signals that arrive
 * meanwhile stay in the inbox.
 */
export function sleep<S>(nextStep: string, state: S, duration: SleepDuration): Outcome {
  if (typeof duration !== 'object' || duration === null) {
    throw new InvalidOutcomeError(
      `sleep(): the duration must be { for: ms } or { until: Date }, got ${String(duration)}`,
    );
  }
  const hasFor = duration.for !== undefined;
  const hasUntil = duration.until !== undefined;
  if (hasFor === hasUntil) {
    throw new InvalidOutcomeError('sleep(): give exactly one of { for: ms } and { until: Date }');
  }
  if (hasFor) {
    const ms: unknown = duration.for;
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_DELAY_MS) {
      throw new InvalidOutcomeError(
        `sleep(): for must be an integer number of ms in 0 … ${MAX_DELAY_MS}, got ${String(ms)}`,
      );
    }
    return brand({
      kind: 'sleep',
      step: stepName('sleep', nextStep),
      state,
      delayMs: ms,
      until: null,
    });
  }
  const until: unknown = duration.until;
  const at = until instanceof Date ? until.getTime() : NaN;
  if (!(at >= MIN_UNTIL_MS && at <= MAX_UNTIL_MS)) {
    throw new InvalidOutcomeError(
      `sleep(): until must be a valid Date in years 1 … 9999, got ${until instanceof Date ? 'an invalid Date' : String(until)}`,
    );
  }
  return brand({
    kind: 'sleep',
    step: stepName('sleep', nextStep),
    state,
    delayMs: 0,
    until: new Date(at),
  });
}

/** Park until a signal named in `names` arrives (or the timeout fires), then run `nextStep`. */
export function awaitSignal<S>(
  names: string | readonly string[],
  nextStep: string,
  state: S,
  options: { timeout?: number } = {},
): Outcome {
  const list = typeof names === 'string' ? [names] : [...names];
  if (list.length === 0 || !list.every((n) => typeof n === 'string' && n.length > 0)) {
    throw new InvalidOutcomeError(
      'awaitSignal(): names must be a non-empty string or a non-empty array of them',
    );
  }
  if (
    options.timeout !== undefined &&
    !(Number.isInteger(options.timeout) && options.timeout > 0)
  ) {
    throw new InvalidOutcomeError(
      `awaitSignal(): timeout must be an integer > 0 (ms), got ${String(options.timeout)}`,
    );
  }
  return brand({
    kind: 'await',
    names: Object.freeze(list),
    step: stepName('awaitSignal', nextStep),
    state,
    timeoutMs: options.timeout,
  });
}

/** Spawn `children` and park until every landed child is terminal, then run `nextStep`. */
export function scheduleChildren<S>(
  nextStep: string,
  children: readonly ChildSpec[],
  state: S,
): Outcome {
  if (!isArray(children)) {
    throw new InvalidOutcomeError('scheduleChildren(): children must be an array');
  }
  return brand({
    kind: 'scheduleChildren',
    step: stepName('scheduleChildren', nextStep),
    children: Object.freeze([...children]),
    state,
  });
}

/** Finish with `result` (a JSON object). */
export function done(result: Record<string, unknown> = {}): Outcome {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw new InvalidOutcomeError(
      `done(): result must be a JSON object, got ${Array.isArray(result) ? 'an array' : String(result)}`,
    );
  }
  return brand({ kind: 'done', result });
}

/** Fail with `reason` (string as-is, `Error.message`, else `util.inspect`). */
export function stop(reason: unknown): Outcome {
  return brand({ kind: 'stop', reason: reasonText(reason) });
}

/** The stored text of a failure reason. */
export function reasonText(reason: unknown): string {
  if (typeof reason === 'string') return reason;
  if (reason instanceof Error) return reason.message;
  return inspect(reason, { depth: 4 });
}
