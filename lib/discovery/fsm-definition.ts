import type { RetentionOverride } from '../fsm/retention';
import type { StateCodec } from '../fsm/state-codec';
import type { StepContext } from '../fsm/step-context';
import type { HistoryLevel } from '../instance/history-entry';
import type { StandardSchemaV1 } from '../fsm/fsm-schemas';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';
import type { FsmSequence } from '../fsm/sequence-policy';

export type StepFunction = (ctx: StepContext<unknown>) => unknown;

/**
 * `@DurableFsm({ deadlineMs, onDeadline, deadlineGraceMs })` (docs/operations-control.md
 * "Instance deadlines"): each null when not declared.
 */
export interface FsmDeadline {
  /** The default deadline of its inserts, ms from the insert. */
  readonly ms: number | null;
  /** The step a live instance past its deadline moves to (instead of being cancelled). */
  readonly onDeadline: string | null;
  /** How long an executing instance past its deadline may still commit, ms (default: `leaseTtl`). */
  readonly graceMs: number | null;
}

/** A registered FSM: one `(name, version)` bound to its provider instance. */
export interface FsmDefinition {
  readonly name: string;
  readonly version: number;
  readonly queue: string;
  readonly initial: string;
  readonly inlineExecution: boolean;
  readonly kind: 'fsm' | 'job';
  /** Jobs: executions before stop. */
  readonly maxAttempts: number;
  readonly codec: StateCodec | undefined;
  /** Signal names whose delivery cancels the instance (docs/design.md §27.2). */
  readonly cancelOn: ReadonlySet<string>;
  /** Its instance deadline declarations; absent = none declared. */
  readonly deadline?: FsmDeadline | undefined;
  /** `@DurableFsm({ sequenceKey, onHeadFailure })` (docs/sequences.md); absent = none declared. */
  readonly sequence?: FsmSequence | undefined;
  /** What its step history records (docs/design.md §28.1). */
  readonly history: HistoryLevel;
  /**
   * `@DurableFsm({ fairnessKey })`: the default fairness key of its inserts, from the inserted
   * state (docs/many-tenants.md "Fair claims by key"); absent = none.
   */
  readonly fairnessKey?: ((state: Record<string, unknown>) => unknown) | undefined;
  /** Its own retention per status, ms, where it overrides the module's `gc` (empty = none). */
  readonly retention: RetentionOverride;
  /** The provider class. */
  readonly metatype: abstract new (...args: never[]) => unknown;
  /** step name → bound method */
  readonly steps: ReadonlyMap<string, StepFunction>;
  /** step name → its timeout, ms (`@Step({ timeout })`, else `stepTimeout`); absent = none. */
  readonly timeouts: ReadonlyMap<string, number>;
  /**
   * The steps that run in a transaction with their outcome (`@Step({ transactional })`, a
   * job's `@DurableFsm({ transactional })`; docs/transactional-steps.md); empty = none.
   */
  readonly transactional: ReadonlySet<string>;
  /**
   * step name → the targets its `@Step({ next })` declares (steps of this FSM, or `'$done'`);
   * a step absent here declared none (docs/design.md §30). Drawn by `engine.graph`.
   */
  readonly next: ReadonlyMap<string, readonly string[]>;
  /** Bound `onError(err, ctx)`, when the class defines one. */
  readonly onError: ((err: unknown, ctx: StepContext<unknown>) => unknown) | undefined;
  /** Jobs: bound `backoff(attempt)`, when the class defines one. */
  readonly backoff: ((attempt: number) => number) | undefined;
  /** `@DurableFsm({ state })`: validates inserted state (docs/schemas.md); undefined = none. */
  readonly stateSchema: StandardSchemaV1 | undefined;
  /** `@DurableFsm({ signals })`: signal name → payload schema (empty = none). */
  readonly signalSchemas: ReadonlyMap<string, StandardSchemaV1>;
  /** `@DurableFsm({ result })`: validates `done(result)` in the executor; undefined = none. */
  readonly resultSchema: StandardSchemaV1 | undefined;
  /**
   * The step interceptors wrapping its steps, the module's first then its
   * `@UseStepInterceptors` (docs/interceptors.md); undefined = none (the step is called bare).
   */
  readonly interceptors: readonly DurableStepInterceptor[] | undefined;
}
