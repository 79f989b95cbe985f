import { createHash } from 'node:crypto';

import { toJsonObjectText } from '../serialization/json-value';
import { CronExpression, CronInputError } from './cron-expression';
import type { MissedPolicy, OverlapPolicy } from './schedule-spec';

/** Default of `maxCatchup` (docs/cron.md). */
export const DEFAULT_MAX_CATCHUP = 10;

/**
 * A validated schedule definition, ready to be stored: what `@DurableCron` or
 * `engine.schedules.upsert` declared, with its parsed expression and the hash of every field
 * that shapes a fire (docs/design.md §29).
 */
export interface ResolvedSchedule {
  readonly name: string;
  readonly fsm: string;
  readonly expression: CronExpression;
  readonly missed: MissedPolicy;
  readonly maxCatchup: number;
  readonly overlap: OverlapPolicy;
  /** The stored state (JSON object text); `{}` when it comes from a function. */
  readonly stateText: string;
  /** `@DurableCron({ state: () => … })`: called at each fire on the firing node. */
  readonly stateFn: (() => unknown) | undefined;
  /** Null: the FSM's queue. */
  readonly queue: string | null;
  readonly priority: number;
  readonly declared: boolean;
  readonly hash: string;
}

/** The raw fields of a definition, from a decorator or from a run-time spec. */
export interface ScheduleInput {
  readonly name: unknown;
  readonly fsm: string;
  readonly cron: unknown;
  readonly tz?: unknown;
  readonly missed?: unknown;
  readonly maxCatchup?: unknown;
  readonly overlap?: unknown;
  readonly state?: unknown;
  readonly queue?: unknown;
  readonly priority?: unknown;
}

/** Names the offending field (`path` is the definition's label plus the field) and throws. */
export type ScheduleFailure = (field: string, problem: string) => never;

const MISSED: readonly MissedPolicy[] = ['skip', 'once', 'all'];
const OVERLAP: readonly OverlapPolicy[] = ['skip', 'allow'];

/**
 * Validates one definition; `fail` turns a problem into the caller's typed error (a
 * `ConfigurationError` at boot, an `InvalidInputError` at run time). Nothing is written.
 */
export function resolveSchedule(
  input: ScheduleInput,
  declared: boolean,
  maxStateBytes: number,
  fail: ScheduleFailure,
): ResolvedSchedule {
  if (typeof input.name !== 'string' || input.name.length === 0 || input.name.length > 200) {
    fail('name', 'must be a non-empty string of at most 200 characters');
  }
  const name = input.name;
  let expression: CronExpression;
  try {
    expression = CronExpression.parse(input.cron, input.tz ?? 'UTC');
  } catch (err) {
    if (err instanceof CronInputError) fail(err.field, err.problem);
    throw err;
  }
  const missed = input.missed ?? 'skip';
  if (!MISSED.includes(missed as MissedPolicy)) {
    fail('missed', `must be 'skip', 'once' or 'all', got ${JSON.stringify(missed)}`);
  }
  const overlap = input.overlap ?? 'allow';
  if (!OVERLAP.includes(overlap as OverlapPolicy)) {
    fail('overlap', `must be 'skip' or 'allow', got ${JSON.stringify(overlap)}`);
  }
  const maxCatchup = input.maxCatchup ?? DEFAULT_MAX_CATCHUP;
  if (
    typeof maxCatchup !== 'number' ||
    !Number.isInteger(maxCatchup) ||
    maxCatchup < 1 ||
    maxCatchup > 1000
  ) {
    fail('maxCatchup', `must be an integer in 1..1000, got ${JSON.stringify(maxCatchup)}`);
  }
  const queue = input.queue ?? null;
  if (queue !== null && (typeof queue !== 'string' || queue.length === 0)) {
    fail('queue', 'must be a non-empty string');
  }
  const priority = input.priority ?? 0;
  if (
    typeof priority !== 'number' ||
    !Number.isInteger(priority) ||
    priority < -32768 ||
    priority > 32767
  ) {
    fail(
      'priority',
      `must be an integer in -32768..32767 (smallint), got ${JSON.stringify(priority)}`,
    );
  }
  let stateText = '{}';
  let stateFn: (() => unknown) | undefined;
  if (typeof input.state === 'function') {
    if (!declared) fail('state', 'must be a JSON object (a function is only for @DurableCron)');
    stateFn = input.state as () => unknown;
  } else if (input.state !== undefined) {
    try {
      stateText = toJsonObjectText(input.state, 'state', maxStateBytes);
    } catch (err) {
      fail('state', err instanceof Error ? err.message : String(err));
    }
    if ('_cron' in (input.state as Record<string, unknown>)) {
      fail('state', '_cron is set by each fire: choose another key');
    }
  }
  const hash = createHash('sha256')
    .update(
      JSON.stringify([
        input.fsm,
        expression.expression,
        expression.timeZone,
        missed,
        maxCatchup,
        overlap,
        stateFn ? null : stateText,
        stateFn !== undefined,
        queue,
        priority,
      ]),
    )
    .digest('hex')
    .slice(0, 32);
  return Object.freeze({
    name,
    fsm: input.fsm,
    expression,
    missed: missed as MissedPolicy,
    maxCatchup: maxCatchup,
    overlap: overlap as OverlapPolicy,
    stateText,
    stateFn,
    queue: queue,
    priority: priority,
    declared,
    hash,
  });
}
