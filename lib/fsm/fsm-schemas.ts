import type { StandardSchemaV1 } from '@standard-schema/spec';

import type { InsertOptions } from './insert-options.interface';
import type { Signal, StepContext } from './step-context';

export type { StandardSchemaV1 };

/**
 * The schemas of an FSM (docs/schemas.md): any Standard Schema (zod, valibot, arktype…) for its
 * state, the payload of each named signal and its result. Inserts, signals and results are
 * validated with them at the boundary; the types below infer a step's context from them.
 */
export interface FsmSchemas {
  /** The state an insert gives (and children a step schedules). */
  readonly state?: StandardSchemaV1;
  /** Signal name → the schema of its payload. */
  readonly signals?: Readonly<Record<string, StandardSchemaV1>>;
  /** The result a step's `done(result)` (or a job's return) ends the instance with. */
  readonly result?: StandardSchemaV1;
}

/** The output of `S`, or `Fallback` when `S` is not a schema. */
type OutputOf<S, Fallback> = S extends StandardSchemaV1
  ? StandardSchemaV1.InferOutput<S>
  : Fallback;
/** The input of `S`, or `Fallback` when `S` is not a schema. */
type InputOf<S, Fallback> = S extends StandardSchemaV1 ? StandardSchemaV1.InferInput<S> : Fallback;

/** The state a step sees (the state schema's output). */
export type SchemaState<S extends FsmSchemas> = OutputOf<S['state'], Record<string, unknown>>;
/** The state an insert takes (the state schema's input). */
export type SchemaStateInput<S extends FsmSchemas> = InputOf<S['state'], Record<string, unknown>>;
/** The declared signal names. */
export type SchemaSignalName<S extends FsmSchemas> = keyof NonNullable<S['signals']> & string;
/** The payload `engine.signal` takes for signal `N` (its schema's input). */
export type SchemaSignalInput<S extends FsmSchemas, N extends SchemaSignalName<S>> = InputOf<
  NonNullable<S['signals']>[N],
  unknown
>;
/** The result an instance ends with (the result schema's output). */
export type SchemaResult<S extends FsmSchemas> = OutputOf<S['result'], Record<string, unknown>>;

/** A signal of a schema-typed FSM: its `name` narrows its `payload` (the schema's output). */
export type SchemaSignal<S extends FsmSchemas> = [SchemaSignalName<S>] extends [never]
  ? Signal
  : {
      [N in SchemaSignalName<S>]: {
        readonly id: string;
        readonly name: N;
        readonly payload: OutputOf<NonNullable<S['signals']>[N], unknown>;
      };
    }[SchemaSignalName<S>];

/**
 * The context of a step of an FSM declaring schemas `S`: `ctx.state` is the state schema's
 * output and `ctx.awaited` / `ctx.all` narrow each declared signal's payload by its name.
 */
export type SchemaStepContext<S extends FsmSchemas> = Omit<
  StepContext<SchemaState<S>>,
  'awaited' | 'all'
> & {
  readonly awaited: readonly SchemaSignal<S>[];
  readonly all: readonly SchemaSignal<S>[];
};

/**
 * What a class declares to carry its schemas' types (no runtime field): `declare readonly
 * '~schemas'?: typeof schemas;`. The typed `engine.signal(Fsm, target, name, payload)` and
 * `engine.insert(Fsm, { state })` overloads read them from it (docs/schemas.md).
 */
export interface SchemaTyped<S extends FsmSchemas> {
  readonly '~schemas'?: S;
}

/** A class whose instances are {@link SchemaTyped}. */
export type SchemaTypedClass<S extends FsmSchemas> = abstract new (
  ...args: never[]
) => SchemaTyped<S>;

/** The schemas a {@link SchemaTypedClass} declares. */
export type SchemasOf<F> = F extends abstract new (...args: never[]) => {
  readonly '~schemas'?: infer S;
}
  ? S extends FsmSchemas
    ? S
    : never
  : never;

/**
 * The insert options `engine.insert(fsm, …)` takes: for a class carrying its schemas' types,
 * `state` is the state schema's input; otherwise plain {@link InsertOptions}.
 */
export type InsertOptionsFor<F> = [SchemasOf<F>] extends [never]
  ? InsertOptions
  : InsertOptions & { state?: SchemaStateInput<SchemasOf<F>> };
