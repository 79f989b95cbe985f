import type { DrainTimeoutError } from '../errors/drain-timeout.error';
import type { LeaseLostError } from '../errors/lease-lost.error';
import type { StepCancelledError } from '../errors/step-cancelled.error';
import type { StepTimeoutError } from '../errors/step-timeout.error';

/**
 * Why a step's `ctx.signal` aborted (docs/design.md §27.5): each cause that exists, mapped to
 * the error class `ctx.signal.reason` then holds. Every such error carries `abortCause` (its
 * key here) and a stable `code`. A new cause adds its entry here and its error class; nothing
 * else lists the causes.
 */
export interface StepAbortReasons {
  /** The step ran past `stepTimeout` / `@Step({ timeout })`; routed as a `StepTimeoutError`. */
  timeout: StepTimeoutError;
  /** A heartbeat found the row's claim taken back or fenced: the outcome will be stale. */
  'lease-lost': LeaseLostError;
  /** Shutdown stopped waiting for the step after `drainTimeout`. */
  'drain-timeout': DrainTimeoutError;
  /** A cooperative cancel of its instance was requested (docs/design.md §27.2). */
  cancelled: StepCancelledError;
}

/** A cause of a step abort: a key of {@link StepAbortReasons}. */
export type StepAbortCause = keyof StepAbortReasons;

/** What `ctx.signal.reason` holds once the signal aborted. */
export type StepAbortReason = StepAbortReasons[StepAbortCause];

/**
 * `ctx.signal.reason`, typed: the abort reason once the signal aborted, else undefined.
 * Narrow on `abortCause` (or `instanceof` the error class).
 */
export function stepAbortReason(signal: AbortSignal): StepAbortReason | undefined {
  return signal.aborted ? (signal.reason as StepAbortReason) : undefined;
}
