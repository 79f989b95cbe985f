import type { EntityManager } from 'typeorm';

import type { FsmDefinition } from '../discovery/fsm-definition';
import type { Signal, StepContext } from '../fsm/step-context';
import { toJsonText } from '../serialization/json-value';
import type { ClaimedRow } from './claimed-row';
import type { StepRun } from './step-run';

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
  // A flat literal: `{ ...spread, more }` is slow on Node 20 (see outcome-entry.ts). The
  // signal is a getter: its AbortController is made only if the step reads it.
  const ctx: { -readonly [K in keyof StepContext<unknown>]: StepContext<unknown>[K] } = {
    id: row.id,
    fsm: row.fsm,
    fsmVersion: row.fsmVersion,
    step: row.step,
    attempt: row.attempt,
    state,
    awaited,
    all,
    children,
    get signal(): AbortSignal {
      return run.signal;
    },
    progress: reporter(run, maxStateBytes),
    lastProgress: row.lastProgress,
    stream: (name: string) => run.stream(name),
  };
  if (manager !== undefined) ctx.manager = manager;
  return Object.freeze(ctx);
}

/** A context of the row as claimed (no codec), for `onError` when the step never got one. */
export function rawContext(
  row: ClaimedRow,
  run: StepRun,
  maxStateBytes: number,
): StepContext<unknown> {
  return {
    id: row.id,
    fsm: row.fsm,
    fsmVersion: row.fsmVersion,
    step: row.step,
    attempt: row.attempt,
    state: row.state,
    awaited: [],
    all: [],
    children: [],
    get signal(): AbortSignal {
      return run.signal;
    },
    progress: reporter(run, maxStateBytes),
    lastProgress: row.lastProgress,
    stream: (name: string) => run.stream(name),
  };
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
