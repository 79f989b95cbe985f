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

/** Run the same step again after `delayMs` (integer ≥ 0), with `attempt + 1`. */
export function retry<S>(state: S, delayMs = 0): Outcome {
  if (!Number.isInteger(delayMs) || delayMs < 0) {
    throw new InvalidOutcomeError(
      `retry(): delayMs must be an integer ≥ 0, got ${String(delayMs)}`,
    );
  }
  return brand({ kind: 'retry', state, delayMs });
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
