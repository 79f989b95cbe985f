import { Injectable, type ScopeOptions, SetMetadata } from '@nestjs/common';

import { DURABLE_FSM_METADATA } from '../gen-durable.constants';
import type { HistoryLevel } from '../instance/history-entry';
import type { RetentionOverride } from '../fsm/retention';
import type { StateCodec } from '../fsm/state-codec';
import type { StandardSchemaV1 } from '../fsm/fsm-schemas';
import type { OnHeadFailure } from '../fsm/sequence-policy';

export type { StateCodec };

/** Nest's scope metadata key (`SCOPE_OPTIONS_METADATA`; not imported: NestJS 12 exposes no deep paths). */
const SCOPE_OPTIONS_METADATA = 'scope:options';

/** Options of `@DurableFsm()` (docs/design.md §2.2). */
export interface DurableFsmOptions {
  /** Stored in the `fsm` column. Default: the class name (logs a warning: minifiers rename classes). */
  name?: string;
  /** Definition version; instances finish on the version they started. Default 1. */
  version?: number;
  /** Queue of new instances. Default `'default'`. */
  queue?: string;
  /** First step. Default `'start'` (a job's is `'perform'`). */
  initial?: string;
  /** Run a `next` step in the same executor on the held claim (docs/design.md §7). Default false. */
  inlineExecution?: boolean;
  /**
   * Jobs only: `perform` runs in a transaction on the engine's DataSource, with `ctx.manager`,
   * and its result commits in it (docs/transactional-steps.md); an FSM marks its steps with
   * `@Step({ transactional: true })` instead. Default false.
   */
  transactional?: boolean;
  /** Jobs: executions before a failing job stops. Default 20. */
  maxAttempts?: number;
  /** State codec. Default plain JSON objects. */
  stateCodec?: StateCodec;
  /**
   * Longest run of any step, ms (integer 1 … 2 147 483 647); `@Step({ timeout })` overrides
   * it per step. Past it, `ctx.signal` aborts and the step's outcome is a `StepTimeoutError`
   * through `onError` / the job retry rule (docs/design.md §27.5). Default: none.
   */
  stepTimeout?: number;
  /**
   * Signal names that cancel an instance instead of being stored (docs/design.md §27.2): such
   * a delivery is a `cancel(target, { reason: 'signal <name>' })` with the default options.
   * Default none.
   */
  cancelOn?: readonly string[];
  /**
   * The default deadline of its instances, ms from the insert (integer ≥ 1); an insert's
   * `deadline` / `deadlineInMs` wins (docs/operations-control.md "Instance deadlines"). A live
   * instance past it is cancelled, or moved to `onDeadline`. Default: none.
   */
  deadlineMs?: number;
  /**
   * The step a live instance past its deadline moves to, runnable at once, instead of being
   * cancelled (docs/operations-control.md "Instance deadlines"). Default: none (cancel).
   */
  onDeadline?: string;
  /**
   * How long an instance whose step is executing at its deadline may still commit, ms
   * (integer ≥ 0): then its claim is fenced and it is cancelled (or moved to `onDeadline`).
   * Default: the module's `leaseTtl`.
   */
  deadlineGraceMs?: number;
  /**
   * What the step history of its instances records (docs/design.md §28.1;
   * docs/operations-control.md "Step history"): `'off'`, `'failures'` (thrown errors, retries,
   * stops, reaps, poison pills, cancels, manual actions), `'transitions'` (every committed
   * outcome too) or `'full'` (with the committed state). Default `'failures'`.
   */
  history?: HistoryLevel;
  /**
   * How long its ended instances are kept, ms, per status (`{ done?, failed?, cancelled? }`),
   * overriding the module's `gc.retention` / `gc.failedRetention` / `gc.cancelledRetention`
   * for this FSM (docs/operations.md, "Garbage collection"). Default: the module's.
   */
  retention?: RetentionOverride;
  /**
   * Standard Schema (zod, valibot, arktype…) of the state (docs/schemas.md): an insert's
   * state, and a child's a step schedules, is validated with it (`InvalidInputError` naming
   * the field, with the schema's message) and its output stored. Default: none.
   */
  state?: StandardSchemaV1;
  /**
   * Signal name → Standard Schema of its payload (docs/schemas.md): a delivery of that name
   * to an instance of this FSM is validated with it and its output stored. Default: none.
   */
  signals?: Readonly<Record<string, StandardSchemaV1>>;
  /**
   * Standard Schema of the result (docs/schemas.md): a step's `done(result)` (a job's return)
   * is validated with it when the step returns; a refused result is a step throw
   * (`InvalidInputError` through `onError`), a valid one is stored as the schema's output.
   * Default: none.
   */
  result?: StandardSchemaV1;
  /**
   * The default fairness key of its inserts, a function of the inserted state (e.g.
   * `(state) => state.tenantId`; docs/many-tenants.md "Fair claims by key"): it must answer a
   * non-empty string of at most 200 characters, else the insert fails with an
   * `InvalidInputError` naming `fairnessKey`. An insert's own `fairnessKey` wins. Default:
   * none (no key: the queue's plain order).
   */
  fairnessKey?: (state: Record<string, unknown>) => string;
  /**
   * The default sequence key of its inserts, a function of the inserted state (as given, before
   * the codec's dump): instances of one key run strictly one after another in insert order
   * (docs/sequences.md). An insert's `sequenceKey` wins; a function that returns `undefined` or
   * `null` gives the instance no key. Default: none.
   */
  sequenceKey?: (state: never) => string | null | undefined;
  /**
   * What a failed instance does to its sequence key (docs/sequences.md "When the head fails"):
   * `'block'` holds the key until it is retried, cancelled or purged; `'skip'` releases it.
   * An insert's `onHeadFailure` wins. Default `'block'`.
   */
  onHeadFailure?: OnHeadFailure;
}

/** Metadata stored on a `@DurableFsm()` class. */
export interface DurableFsmMetadata extends DurableFsmOptions {
  readonly nameDefaulted: boolean;
}

/**
 * Marks a provider class as a durable FSM: `@Step()` methods (or a `perform()` job method)
 * run as steps. The class is also `@Injectable()`, so it gets its own dependencies injected.
 */
export function DurableFsm(options: DurableFsmOptions = {}): ClassDecorator {
  return (target) => {
    const metadata: DurableFsmMetadata = { ...options, nameDefaulted: options.name === undefined };
    SetMetadata(DURABLE_FSM_METADATA, metadata)(target);
    // Keep a scope declared by an @Injectable({ scope }) applied before this decorator, so a
    // request-scoped FSM is refused at boot instead of silently becoming a singleton.
    Injectable(Reflect.getMetadata(SCOPE_OPTIONS_METADATA, target) as ScopeOptions | undefined)(
      target,
    );
  };
}
