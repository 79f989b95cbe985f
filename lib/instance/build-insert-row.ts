import {
  ALL_STATUSES,
  type DurableStatus,
  LIVE_STATUSES,
  TERMINAL_STATUSES,
} from '../gen-durable.constants';
import type { FsmDefinition } from '../discovery/fsm-definition';
import { InvalidInputError } from '../errors/invalid-input.error';
import { isArray } from '../util/is-array';
import { UnknownStepError } from '../errors/unknown-step.error';
import { limitKeyText, limitName } from '../fsm/limit-key';
import { MAX_DELAY_MS, MAX_UNTIL_MS, MIN_UNTIL_MS } from '../fsm/outcome';
import type { ResolvedOptions } from '../options/resolved-options';
import { toJsonObjectText } from '../serialization/json-value';
import type { InsertOptions } from '../fsm/insert-options.interface';
import { delayMs as checkedMs, insertConflictOf } from './insert-conflict';
import type { InsertRow } from './insert-row';
import {
  type FsmSequence,
  type OnHeadFailure,
  onHeadFailureOf,
  sequenceKeyText,
} from '../fsm/sequence-policy';

/**
 * What an insert needs of its FSM: a registered `FsmDefinition`, or the description a
 * `GenDurableClient` was given (docs/design.md §32).
 */
export type InsertDefinition = Pick<
  FsmDefinition,
  'name' | 'version' | 'initial' | 'queue' | 'codec'
> & {
  readonly steps: { has(step: string): boolean };
  /** `@DurableFsm({ deadlineMs })`: the default deadline of its inserts, ms; absent = none. */
  readonly deadline?: { readonly ms: number | null } | undefined;
  /** `@DurableFsm({ fairnessKey })`: the default fairness key, from the state; absent = none. */
  readonly fairnessKey?: ((state: Record<string, unknown>) => unknown) | undefined;
  /** `@DurableFsm({ sequenceKey, onHeadFailure })` (docs/sequences.md); absent = none. */
  readonly sequence?: FsmSequence | undefined;
};

/** The longest fairness key, characters (docs/many-tenants.md "Fair claims by key"). */
export const MAX_FAIRNESS_KEY_LENGTH = 200;
/** The largest fairness weight. */
export const MAX_FAIRNESS_WEIGHT = 1000;

/** A fairness key checked: a non-empty string of at most {@link MAX_FAIRNESS_KEY_LENGTH}. */
function checkFairnessKey(key: unknown, path: string): string {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_FAIRNESS_KEY_LENGTH) {
    throw new InvalidInputError(
      path,
      `must be a non-empty string of at most ${MAX_FAIRNESS_KEY_LENGTH} characters, got ${typeof key === 'string' ? `a string of ${key.length}` : typeof key}`,
    );
  }
  return key;
}

/** The options an insert is checked against. */
export type InsertLimits = Pick<ResolvedOptions, 'maxStateBytes' | 'rateLimits'>;

const INSERT_KEYS = new Set([
  'state',
  'args',
  'step',
  'queue',
  'priority',
  'eligibleAt',
  'scheduleAt',
  'scheduleIn',
  'correlationKey',
  'correlationScope',
  'concurrencyKey',
  'rateLimit',
  'weight',
  'manager',
  'onConflict',
  'debounceMs',
  'maxDelayMs',
  'dedupWindowMs',
  'held',
  'deadline',
  'deadlineInMs',
  'fairnessKey',
  'fairnessWeight',
  'sequenceKey',
  'onHeadFailure',
]);

/**
 * The options only `insert()` takes (docs/identity.md "Conflict modes"): the other insert
 * paths answer inserted ids only. `held`, `dedupWindowMs`, `sequenceKey` and `onHeadFailure`
 * are taken by every path.
 */
const INSERT_ONLY = ['onConflict', 'debounceMs', 'maxDelayMs'] as const;

/**
 * A Date inside years 1 … 9999 (PostgreSQL's timestamptz range holds it): a Date outside it
 * would fail the whole statement, and with it every other caller's row in a group commit.
 */
function validDate(value: unknown, path: string): Date {
  const ms = value instanceof Date ? value.getTime() : NaN;
  if (!(ms >= MIN_UNTIL_MS && ms <= MAX_UNTIL_MS)) {
    throw new InvalidInputError(path, 'must be a valid Date in years 1 … 9999');
  }
  return value as Date;
}

/** Checks a weight against a rate limit this node knows (docs/design.md §26.8). */
export function checkWeight(
  options: Pick<ResolvedOptions, 'rateLimits'>,
  rateLimit: string | null,
  weight: number,
  path: string,
): void {
  if (!(typeof weight === 'number' && Number.isFinite(weight) && weight > 0)) {
    throw new InvalidInputError(path, `must be a finite number > 0, got ${String(weight)}`);
  }
  if (rateLimit === null) return;
  const limit = options.rateLimits[limitName(rateLimit)];
  if (limit && weight > limit.burst) {
    throw new InvalidInputError(
      path,
      `${weight} exceeds the burst ${limit.burst} of rate limit "${limit.name}": the row could never run; split the work`,
    );
  }
}

/**
 * Validates and serializes one insert (docs/design.md §2.5, §26.8). Throws a typed error naming the
 * field; nothing is written for a bad entry.
 */
export function buildInsertRow(
  definition: InsertDefinition,
  input: InsertOptions | undefined,
  options: InsertLimits,
  path = 'insert',
): InsertRow {
  const o = input ?? {};
  if (typeof o !== 'object' || o === null) {
    throw new InvalidInputError(path, 'options must be an object');
  }
  for (const key of Object.keys(o)) {
    if (!INSERT_KEYS.has(key)) {
      throw new InvalidInputError(`${path}.${key}`, 'is not an insert option');
    }
  }
  if (path !== 'insert') {
    for (const key of INSERT_ONLY) {
      if (o[key] !== undefined) {
        throw new InvalidInputError(`${path}.${key}`, `only insert() takes ${key}`);
      }
    }
  }
  const conflict = insertConflictOf(o, path);
  if (o.held !== undefined && typeof o.held !== 'boolean') {
    throw new InvalidInputError(`${path}.held`, 'must be a boolean');
  }
  if (o.state !== undefined && o.args !== undefined) {
    throw new InvalidInputError(path, 'give state or args, not both');
  }
  const step = o.step ?? definition.initial;
  if (!definition.steps.has(step)) throw new UnknownStepError(definition.name, step);

  const rawState: unknown = o.state ?? o.args ?? {};
  const dumped: unknown = definition.codec ? definition.codec.dump(rawState) : rawState;
  const stateText = toJsonObjectText(dumped, `${path}.state`, options.maxStateBytes);

  const queue = o.queue ?? definition.queue;
  if (typeof queue !== 'string' || queue.length === 0) {
    throw new InvalidInputError(`${path}.queue`, 'must be a non-empty string');
  }
  const priority = o.priority ?? 0;
  if (!Number.isInteger(priority) || priority < -32768 || priority > 32767) {
    throw new InvalidInputError(
      `${path}.priority`,
      `must be an integer in -32768..32767 (smallint), got ${String(priority)}`,
    );
  }
  let at: Date | null = null;
  let delayMs = 0;
  if (o.eligibleAt !== undefined) at = validDate(o.eligibleAt, `${path}.eligibleAt`);
  else if (o.scheduleAt !== undefined) at = validDate(o.scheduleAt, `${path}.scheduleAt`);
  else if (o.scheduleIn !== undefined) {
    if (!Number.isInteger(o.scheduleIn) || o.scheduleIn < 0 || o.scheduleIn > MAX_DELAY_MS) {
      throw new InvalidInputError(
        `${path}.scheduleIn`,
        `must be an integer number of ms in 0 … ${MAX_DELAY_MS}, got ${String(o.scheduleIn)}`,
      );
    }
    delayMs = o.scheduleIn;
  }
  if (conflict.mode === 'debounce') delayMs = conflict.debounceMs;

  let correlationKey: string | null = null;
  if (o.correlationKey !== undefined) {
    if (typeof o.correlationKey !== 'string' || o.correlationKey.length === 0) {
      throw new InvalidInputError(`${path}.correlationKey`, 'must be a non-empty string');
    }
    correlationKey = o.correlationKey;
  }
  const scope: readonly DurableStatus[] = o.correlationScope ?? LIVE_STATUSES;
  if (
    !isArray(scope) ||
    !scope.every((s: unknown) => (ALL_STATUSES as readonly unknown[]).includes(s))
  ) {
    throw new InvalidInputError(
      `${path}.correlationScope`,
      `must be an array of ${ALL_STATUSES.join(', ')}`,
    );
  }
  // NOTE: ON CONFLICT settles the guard only at insert. A row that entered its scope later (at
  // a claim, an outcome) would raise a unique violation there instead, aborting every pick of
  // its queue or a whole flush. Empty, or every live status (terminals optional), never re-enters.
  if (scope.length > 0 && !LIVE_STATUSES.every((s) => scope.includes(s))) {
    throw new InvalidInputError(
      `${path}.correlationScope`,
      `must be empty or hold every live status (${LIVE_STATUSES.join(', ')}), optionally with terminal ones (${TERMINAL_STATUSES.join(', ')}); got [${scope.join(', ')}]`,
    );
  }
  const concurrencyKey =
    o.concurrencyKey === undefined
      ? null
      : limitKeyText(o.concurrencyKey, `${path}.concurrencyKey`);
  const rateLimit =
    o.rateLimit === undefined ? null : limitKeyText(o.rateLimit, `${path}.rateLimit`);
  const weight = o.weight ?? 1;
  checkWeight(options, rateLimit, weight, `${path}.weight`);
  let dedupWindowMs: number | null = null;
  if (o.dedupWindowMs !== undefined) {
    dedupWindowMs = checkedMs(o.dedupWindowMs, 1, `${path}.dedupWindowMs`);
    if (correlationKey === null) {
      throw new InvalidInputError(`${path}.dedupWindowMs`, 'needs a correlationKey');
    }
  }

  let fairnessKey: string | null = null;
  if (o.fairnessKey !== undefined) {
    fairnessKey = checkFairnessKey(o.fairnessKey, `${path}.fairnessKey`);
  } else if (definition.fairnessKey !== undefined) {
    fairnessKey = checkFairnessKey(
      definition.fairnessKey(rawState as Record<string, unknown>),
      `${path}.fairnessKey`,
    );
  }
  let fairnessWeight = 1;
  if (o.fairnessWeight !== undefined) {
    const w: unknown = o.fairnessWeight;
    if (typeof w !== 'number' || !Number.isInteger(w) || w < 1 || w > MAX_FAIRNESS_WEIGHT) {
      throw new InvalidInputError(
        `${path}.fairnessWeight`,
        `must be an integer in 1 … ${MAX_FAIRNESS_WEIGHT}, got ${String(w)}`,
      );
    }
    if (fairnessKey === null) {
      throw new InvalidInputError(`${path}.fairnessWeight`, 'needs a fairnessKey');
    }
    fairnessWeight = w;
  }

  let deadlineAt: Date | null = null;
  let deadlineInMs: number | null = null;
  if (o.deadline !== undefined) deadlineAt = validDate(o.deadline, `${path}.deadline`);
  else if (o.deadlineInMs !== undefined) {
    deadlineInMs = checkedMs(o.deadlineInMs, 1, `${path}.deadlineInMs`);
  } else if (definition.deadline?.ms != null) deadlineInMs = definition.deadline.ms;

  const sequence = sequenceOf(definition, o, rawState, path);

  return {
    fsm: definition.name,
    fsmVersion: definition.version,
    step,
    stateText,
    queue,
    priority,
    at,
    delayMs,
    correlationKey,
    scope: scope.join(','),
    concurrencyKey,
    rateLimit,
    weight,
    ...(o.held === true ? { held: true } : {}),
    ...(dedupWindowMs !== null ? { dedupWindowMs } : {}),
    ...(deadlineAt !== null ? { deadlineAt } : {}),
    ...(deadlineInMs !== null ? { deadlineInMs } : {}),
    ...(fairnessKey !== null ? { fairnessKey, fairnessWeight } : {}),
    ...(sequence !== null ? sequence : {}),
  };
}

/**
 * The insert's sequence key and policy (docs/sequences.md): its own `sequenceKey`, else the
 * FSM's `sequenceKey(state)` (a function that throws, or answers anything but a non-empty
 * string, `undefined` or `null`, refuses the insert naming `sequenceKey`); null when none.
 */
function sequenceOf(
  definition: InsertDefinition,
  o: InsertOptions,
  state: unknown,
  path: string,
): { sequenceKey: string; onHeadFailure: OnHeadFailure } | null {
  const policy =
    o.onHeadFailure === undefined
      ? (definition.sequence?.onHeadFailure ?? 'block')
      : onHeadFailureOf(o.onHeadFailure, `${path}.onHeadFailure`);
  let key: string | null = null;
  if (o.sequenceKey !== undefined) key = sequenceKeyText(o.sequenceKey, `${path}.sequenceKey`);
  else if (definition.sequence?.key) {
    let derived: unknown;
    try {
      derived = definition.sequence.key(state as Record<string, unknown>);
    } catch (err) {
      throw new InvalidInputError(
        `${path}.sequenceKey`,
        `the FSM's sequenceKey(state) threw: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    if (derived !== undefined && derived !== null) {
      key = sequenceKeyText(derived, `${path}.sequenceKey`);
    }
  }
  if (key === null) {
    if (o.onHeadFailure !== undefined) {
      throw new InvalidInputError(`${path}.onHeadFailure`, 'needs a sequenceKey');
    }
    return null;
  }
  return { sequenceKey: key, onHeadFailure: policy };
}
