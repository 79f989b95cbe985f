import { inspect } from 'node:util';

import type { FsmDefinition } from '../discovery/fsm-definition';
import { isJobResult } from '../fsm/job-results';
import { done, isOutcome, type Outcome, retry, stop } from '../fsm/outcome';
import type { StepContext } from '../fsm/step-context';

const MAX_BACKOFF_MS = 300_000;

/** docs/design.md §13: a job's `perform` result as an outcome. */
export function jobOutcome(
  value: unknown,
  ctx: StepContext<unknown>,
  definition: FsmDefinition,
): Outcome {
  if (value === undefined) return done({});
  if (isJobResult(value)) {
    return value.kind === 'cancel' ? stop(value.reason) : retryRule(value.reason, ctx, definition);
  }
  if (isOutcome(value)) return value;
  if (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype
  ) {
    return done(value as Record<string, unknown>);
  }
  return stop(`perform returned an invalid value: ${inspect(value, { depth: 2 })}`);
}

/**
 * docs/design.md §13: a job's retry rule: retry with the FSM's backoff (or exponential from 1 s,
 * capped at 5 minutes) while attempts remain, else stop with `reason`.
 */
export function retryRule(
  reason: unknown,
  ctx: StepContext<unknown>,
  definition: FsmDefinition,
): Outcome {
  if (ctx.attempt + 1 < definition.maxAttempts) {
    const delay = definition.backoff
      ? definition.backoff(ctx.attempt)
      : Math.min(1000 * 2 ** ctx.attempt, MAX_BACKOFF_MS);
    return retry(
      ctx.state,
      Math.max(0, Math.round(Number.isFinite(delay) ? delay : MAX_BACKOFF_MS)),
    );
  }
  return stop(reason);
}
