import type { EntityManager } from 'typeorm';

import type { FsmDefinition } from '../discovery/fsm-definition';
import type { ChildView, Signal, StepContext } from '../fsm/step-context';
import { toJsonText } from '../serialization/json-value';
import type { ClaimedRow } from './claimed-row';
import type { StepRun } from './step-run';

/**
 * A step's context object. A class rather than an object literal: a literal with a getter
 * (the lazy `signal`) is built by V8's slow path as a dictionary-mode object, ~1–2 µs and
 * ~1 KB per step on Node 20 (docs/performance.md "Issue 35: drain against the raw floor"); an
 * instance of this class takes ~0.2 µs and keeps fast properties. `signal` is a getter of the
 * prototype (its AbortController is made only if the step reads it); every other member is an
 * own property, and `progress` / `stream` are closures, so they work detached from `ctx`.
 * Instances are frozen.
 */
class RunContext implements StepContext<unknown> {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly attempt: number;
  readonly state: unknown;
  readonly awaited: readonly Signal[];
  readonly all: readonly Signal[];
  readonly children: readonly ChildView[];
  readonly progress: (value: unknown) => void;
  readonly lastProgress: unknown;
  readonly stream: StepContext<unknown>['stream'];
  declare readonly manager?: EntityManager;
  readonly #run: StepRun;

  constructor(
    row: ClaimedRow,
    state: unknown,
    awaited: readonly Signal[],
    all: readonly Signal[],
    children: readonly ChildView[],
    run: StepRun,
    maxStateBytes: number,
    manager: EntityManager | undefined,
  ) {
    this.id = row.id;
    this.fsm = row.fsm;
    this.fsmVersion = row.fsmVersion;
    this.step = row.step;
    this.attempt = row.attempt;
    this.state = state;
    this.awaited = awaited;
    this.all = all;
    this.children = children;
    this.progress = reporter(run, maxStateBytes);
    this.lastProgress = row.lastProgress;
    this.stream = (name: string) => run.stream(name);
    this.#run = run;
    if (manager !== undefined) (this as { manager?: EntityManager }).manager = manager;
    Object.freeze(this);
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }
}

/**
 * The StepContext of a claimed row's step: its state loaded by the FSM's codec, the signals it
 * awaited and its children, a lazy abort signal, `ctx.progress` (docs/design.md §2, §28.2) and
 * `ctx.stream` (docs/streams.md);
 * a transactional step's `manager` (docs/transactional-steps.md), present only then.
 */
export function stepContext(
  row: ClaimedRow,
  definition: FsmDefinition,
  awaited: readonly Signal[],
  all: readonly Signal[],
  children: ClaimedRow['children'],
  run: StepRun,
  maxStateBytes: number,
  manager?: EntityManager,
): StepContext<unknown> {
  // The row's state was parsed for this claim alone: no copy needed.
  const state: unknown = definition.codec ? definition.codec.load(row.state) : row.state;
  return new RunContext(row, state, awaited, all, children, run, maxStateBytes, manager);
}

const NO_SIGNALS: readonly Signal[] = Object.freeze([]);
const NO_CHILDREN: readonly ChildView[] = Object.freeze([]);

/** A context of the row as claimed (no codec), for `onError` when the step never got one. */
export function rawContext(
  row: ClaimedRow,
  run: StepRun,
  maxStateBytes: number,
): StepContext<unknown> {
  return new RunContext(
    row,
    row.state,
    NO_SIGNALS,
    NO_SIGNALS,
    NO_CHILDREN,
    run,
    maxStateBytes,
    undefined,
  );
}

/**
 * `ctx.progress` of one run: validates the value as JSON at the call (`InvalidInputError`
 * naming `ctx.progress`) and keeps it as the run's pending value (docs/design.md §28.2).
 */
function reporter(run: StepRun, maxBytes: number): (value: unknown) => void {
  return (value: unknown): void => {
    run.reportProgress(toJsonText(value, 'ctx.progress', maxBytes));
  };
}
