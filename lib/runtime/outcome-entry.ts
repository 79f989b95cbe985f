import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import type { InsertOptions } from '../fsm/insert-options.interface';
import type { InsertRow } from '../instance/insert-row';
import { buildInsertRow, checkWeight } from '../instance/build-insert-row';
import { InvalidOutcomeError } from '../errors/invalid-outcome.error';
import { UnknownStepError } from '../errors/unknown-step.error';
import { limitKeyText } from '../fsm/limit-key';
import { isOutcome, type Outcome } from '../fsm/outcome';
import { assertNever } from '../fsm/outcome-kinds';
import type { ResolvedOptions } from '../options/resolved-options';
import { toJsonObjectText } from '../serialization/json-value';
import type { ClaimedRow } from './claimed-row';
import type { EntryKind } from '../fsm/outcome-kinds';
import type { HistoryLevel } from '../instance/history-entry';
import type {
  FanOutEntry,
  FlushEntry,
  HistoryMark,
  ParkEntry,
  TransitionEntry,
} from './flush-entry';
import type { LimitClosure, LimiterSlot } from '../limiter/limiter.interface';
import { throttleClosures } from './throttle-closures';

/**
 * Validates an outcome against the FSM and serializes it into a flush entry (docs/design.md §2.4,
 * §26.8). Runs inside the guarded region: any throw here goes to `onError`.
 */
export function outcomeToEntry(
  value: unknown,
  row: ClaimedRow,
  definition: FsmDefinition,
  registry: FsmRegistry,
  options: ResolvedOptions,
  awaitedIds: readonly string[],
): FlushEntry {
  if (!isOutcome(value)) {
    throw new InvalidOutcomeError(
      `step "${row.step}" of ${row.fsm} returned ${describe(value)}; return next(), retry(), throttle(), sleep(), awaitSignal(), scheduleChildren(), done() or stop()`,
    );
  }
  const outcome: Outcome = value;
  const stateText = (state: unknown, path: string): string =>
    toJsonObjectText(
      definition.codec ? definition.codec.dump(state) : state,
      path,
      options.maxStateBytes,
    );
  const level = definition.history;
  const requireStep = (step: string): string => {
    if (!definition.steps.has(step)) throw new UnknownStepError(definition.name, step);
    return step;
  };

  switch (outcome.kind) {
    case 'next': {
      const rateLimit =
        outcome.options.rateLimit === undefined
          ? null
          : limitKeyText(outcome.options.rateLimit, 'next.rateLimit');
      const weight = outcome.options.weight ?? 1;
      checkWeight(options, rateLimit, weight, 'next.weight');
      const ck = outcome.options.concurrencyKey;
      const inline = outcome.options.inlineExecution;
      if (inline !== undefined && typeof inline !== 'boolean') {
        throw new InvalidOutcomeError(
          `next(): inlineExecution must be a boolean, got ${String(inline)}`,
        );
      }
      return transition(row, awaitedIds, level, 'next', {
        nextStep: requireStep(outcome.step),
        stateText: stateText(outcome.state, 'next.state'),
        rateLimit,
        weight,
        setKey: ck !== undefined,
        concurrencyKey:
          ck === undefined || ck === null ? null : limitKeyText(ck, 'next.concurrencyKey'),
        inline: inline ?? definition.inlineExecution,
      });
    }
    case 'retry':
      return transition(row, awaitedIds, level, 'retry', {
        stateText: stateText(outcome.state, 'retry.state'),
        delayMs: outcome.delayMs,
      });
    case 'throttle': {
      const closes = throttleClosures(options, outcome.limit, outcome.key, outcome.retryAfterMs);
      return throttleEntry(row, awaitedIds, level, outcome.retryAfterMs, closes, false);
    }
    case 'sleep':
      return transition(row, awaitedIds, level, 'sleep', {
        nextStep: requireStep(outcome.step),
        stateText: stateText(outcome.state, 'sleep.state'),
        delayMs: outcome.delayMs,
        at: outcome.until,
      });
    case 'done':
      return transition(row, awaitedIds, level, 'done', {
        resultText: toJsonObjectText(outcome.result, 'done.result', options.maxStateBytes),
      });
    case 'stop':
      return transition(row, awaitedIds, level, 'stop', { error: outcome.reason });
    case 'await':
      return new Park(row, awaitedIds, historyMark(level, 'await', false), {
        nextStep: requireStep(outcome.step),
        stateText: stateText(outcome.state, 'awaitSignal.state'),
        names: outcome.names,
        timeoutMs: outcome.timeoutMs ?? null,
      });
    case 'scheduleChildren':
      return new FanOut(row, awaitedIds, historyMark(level, 'scheduleChildren', false), {
        nextStep: requireStep(outcome.step),
        stateText: stateText(outcome.state, 'scheduleChildren.state'),
        children: outcome.children.map((spec, i) => {
          const path = `scheduleChildren.children[${i}]`;
          if (typeof spec === 'function' || typeof spec === 'string') {
            return buildInsertRow(registry.resolve(spec), undefined, options, path);
          }
          if (typeof spec !== 'object' || spec === null) {
            throw new InvalidOutcomeError(
              `${path} must be an FSM class, a name or { fsm, ...options }`,
            );
          }
          const { fsm, ...insert } = spec as { fsm: unknown } & InsertOptions;
          if (insert.manager !== undefined) {
            throw new InvalidOutcomeError(
              `${path}.manager is not allowed: children commit in the flush`,
            );
          }
          return buildInsertRow(registry.resolve(fsm), insert, options, path);
        }),
      });
    default:
      return assertNever(outcome, 'outcome kind');
  }
}

/** The per-kind fields of a transition entry; the rest take their neutral values. */
interface TransitionFields {
  readonly nextStep?: string;
  readonly stateText?: string;
  readonly resultText?: string;
  readonly error?: string;
  readonly delayMs?: number;
  readonly at?: Date | null;
  readonly rateLimit?: string | null;
  readonly weight?: number;
  readonly setKey?: boolean;
  readonly concurrencyKey?: string | null;
  readonly inline?: boolean;
}

/**
 * Whether an entry writes a history row (docs/design.md §28.1): `'failures'` records retries,
 * stops and anything a step threw, and whatever ends `cancelled` (only the flush knows: mark
 * 1); `'transitions'` every committed outcome; `'full'` with its state.
 */
export function historyMark(level: HistoryLevel, kind: EntryKind, thrown: boolean): HistoryMark {
  switch (level) {
    case 'off':
      return 0;
    case 'failures':
      return thrown || kind === 'retry' || kind === 'stop' ? 2 : 1;
    case 'transitions':
      return 2;
    case 'full':
      return 3;
    default:
      return assertNever(level, 'history level');
  }
}

/**
 * A `throttle` entry (docs/design.md §16.5): the same step after `retryAfterMs`, state and
 * attempt as they were, closing `closes` once committed. `thrown`: built for a thrown error's
 * `retryAfterMs` (its history mark records it).
 */
export function throttleEntry(
  row: ClaimedRow,
  awaitedIds: readonly string[],
  level: HistoryLevel,
  retryAfterMs: number,
  closes: readonly LimitClosure[],
  thrown: boolean,
): TransitionEntry {
  const entry = transition(row, awaitedIds, level, 'throttle', { delayMs: retryAfterMs });
  return Object.assign(entry, { closes, history: historyMark(level, 'throttle', thrown) });
}

function transition(
  row: ClaimedRow,
  awaitedIds: readonly string[],
  level: HistoryLevel,
  kind: TransitionEntry['kind'],
  f: TransitionFields,
): TransitionEntry {
  return new Transition(row, awaitedIds, historyMark(level, kind, false), kind, f);
}

/**
 * The fields every flush entry carries, from its claimed row. Entries are class instances, not
 * object literals: they live until their flush answers, long enough that V8's allocation-site
 * pretenuring sometimes moved a literal's allocations straight to the old generation for the
 * rest of a drain (+40 MB of peak RSS in one run of five, docs/performance.md "Allocation per
 * step"); instances of a class carry no allocation site, and each is one allocation with its
 * fields in one order (no `Object.assign` growing a property store field by field, no
 * `{ ...base }`, a slow path on Node 20's V8).
 */
abstract class EntryFields {
  readonly id: string;
  readonly seq: string;
  readonly worker: string;
  readonly queue: string;
  readonly fsm: string;
  readonly step: string;
  readonly parentId: string | null;
  readonly slot: LimiterSlot | null;
  readonly attempt: number;
  readonly thrown: string | null = null;

  constructor(
    row: ClaimedRow,
    readonly awaitedIds: readonly string[],
    readonly history: HistoryMark,
  ) {
    this.id = row.id;
    this.seq = row.claimSeq;
    this.worker = row.worker;
    this.queue = row.queue;
    this.fsm = row.fsm;
    this.step = row.step;
    this.parentId = row.parentId;
    this.slot = row.slot ?? null;
    this.attempt = row.attempt;
  }
}

/** A transition entry: the per-kind fields given, the rest at their neutral values. */
class Transition extends EntryFields implements TransitionEntry {
  readonly nextStep: string | null;
  readonly stateText: string | null;
  readonly resultText: string | null;
  readonly error: string | null;
  readonly delayMs: number;
  readonly at: Date | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  readonly setKey: boolean;
  readonly concurrencyKey: string | null;
  readonly inline: boolean | undefined;

  constructor(
    row: ClaimedRow,
    awaitedIds: readonly string[],
    history: HistoryMark,
    readonly kind: TransitionEntry['kind'],
    f: TransitionFields,
  ) {
    super(row, awaitedIds, history);
    this.nextStep = f.nextStep ?? null;
    this.stateText = f.stateText ?? null;
    this.resultText = f.resultText ?? null;
    this.error = f.error ?? null;
    this.delayMs = f.delayMs ?? 0;
    this.at = f.at ?? null;
    this.rateLimit = f.rateLimit ?? null;
    this.weight = f.weight ?? 1;
    this.setKey = f.setKey ?? false;
    this.concurrencyKey = f.concurrencyKey ?? null;
    this.inline = f.inline;
  }
}

/** An `awaitSignal` entry (a park). */
class Park extends EntryFields implements ParkEntry {
  readonly kind = 'await' as const;
  readonly nextStep: string;
  readonly stateText: string;
  readonly names: readonly string[];
  readonly timeoutMs: number | null;

  constructor(
    row: ClaimedRow,
    awaitedIds: readonly string[],
    history: HistoryMark,
    f: Pick<ParkEntry, 'nextStep' | 'stateText' | 'names' | 'timeoutMs'>,
  ) {
    super(row, awaitedIds, history);
    this.nextStep = f.nextStep;
    this.stateText = f.stateText;
    this.names = f.names;
    this.timeoutMs = f.timeoutMs;
  }
}

/** A `scheduleChildren` entry (a fan-out). */
class FanOut extends EntryFields implements FanOutEntry {
  readonly kind = 'scheduleChildren' as const;
  readonly nextStep: string;
  readonly stateText: string;
  readonly children: readonly InsertRow[];

  constructor(
    row: ClaimedRow,
    awaitedIds: readonly string[],
    history: HistoryMark,
    f: Pick<FanOutEntry, 'nextStep' | 'stateText' | 'children'>,
  ) {
    super(row, awaitedIds, history);
    this.nextStep = f.nextStep;
    this.stateText = f.stateText;
    this.children = f.children;
  }
}

/**
 * What a step returned instead of an outcome, for the error (and so the log line): its type, and
 * an object's first keys, never its values: they may be the state, which may hold personal data
 * (docs/design.md §31).
 */
function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (typeof value === 'object') {
    const keys = Object.keys(value);
    const shown = keys.slice(0, 5).join(', ') + (keys.length > 5 ? ', …' : '');
    return `an object that is not an outcome (keys: ${shown || 'none'})`;
  }
  return `a ${typeof value}`;
}
