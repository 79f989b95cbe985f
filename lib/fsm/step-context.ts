import type { EntityManager } from 'typeorm';

import type { DurableStatus } from '../gen-durable.constants';
import type { DurableStream } from './durable-stream';

/** A signal in an instance's inbox. */
export interface Signal {
  readonly id: string;
  readonly name: string;
  readonly payload: unknown;
}

/** A stored child of the instance (every round). */
export interface ChildView {
  readonly id: string;
  readonly fsm: string;
  readonly status: DurableStatus;
  readonly state: unknown;
  readonly result: unknown;
  readonly lastError: string | null;
}

/** What a step receives (docs/design.md §2.3). Lists are ordered by id, snapshots taken at claim time. */
export interface StepContext<S = Record<string, unknown>> {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  /** 0 on the first run of this step; +1 per retry or reap. */
  readonly attempt: number;
  readonly state: S;
  /** Unconsumed inbox signals whose name is in the set the row parked on. */
  readonly awaited: readonly Signal[];
  /** The whole unconsumed inbox. */
  readonly all: readonly Signal[];
  /** Every stored child, all rounds. */
  readonly children: readonly ChildView[];
  /**
   * Aborted when the engine wants the step to stop (docs/design.md §27.5): it ran past its
   * timeout, its claim was lost, or shutdown stopped waiting for it. `signal.reason` is then a
   * `StepAbortReason` naming the cause (`abortCause`); read it typed with `stepAbortReason()`.
   * Pass it to `fetch`, database drivers and timers so their work stops too.
   */
  readonly signal: AbortSignal;
  /**
   * Reports the step's progress (docs/design.md §28.2): any JSON value (checked like state:
   * `InvalidInputError` at the call for a value that is not JSON or is too large). Only the
   * latest value is kept; the next heartbeat stores it (no statement of its own), after which
   * `get()` answers it as `progress` / `progressAt` and `step:progress` is emitted. A value
   * reported after the step's last heartbeat is not stored.
   */
  progress(value: unknown): void;
  /**
   * The progress this step stored in an earlier run of it (a retry, a reap, a manual retry), so
   * it can resume; undefined on a step that stored none.
   */
  readonly lastProgress: unknown;
  /**
   * The instance's durable stream `name` (docs/streams.md): `write(chunk)` appends a JSON chunk
   * and resolves with its offset once committed; readers follow it with `engine.readStream`.
   * The chunks are kept with the instance. A step that runs again (a retry, a reap after a
   * crash) appends after what its earlier runs committed: check `ctx.attempt` to mark a restart.
   * `InvalidInputError` for a name that is not a non-empty string of at most 200 characters.
   */
  stream(name: string): DurableStream;
  /**
   * A transactional step's (`@Step({ transactional: true })`, docs/transactional-steps.md)
   * TypeORM `EntityManager`, inside the transaction its outcome commits in: its writes
   * commit exactly once, with the outcome, or not at all. Absent in other steps.
   */
  readonly manager?: EntityManager;
}

/** What a transactional step receives: the context with its transaction's `manager`. */
export interface TransactionalStepContext<S = Record<string, unknown>> extends StepContext<S> {
  /** The step's TypeORM `EntityManager`, inside the transaction its outcome commits in. */
  readonly manager: EntityManager;
}
