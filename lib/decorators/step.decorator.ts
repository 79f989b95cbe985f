import { STEP_METADATA } from '../gen-durable.constants';

/** Options of `@Step()` (docs/design.md §2.2, §27.5). */
export interface StepOptions {
  /** The step name. Default: the method name. */
  name?: string;
  /**
   * Longest run of this step, ms (integer 1 … 2 147 483 647); wins over the FSM's
   * `stepTimeout`. Past it, `ctx.signal` aborts and the step's outcome is a
   * `StepTimeoutError` through `onError` / the job retry rule. Default: the FSM's, else none.
   */
  timeout?: number;
  /**
   * The steps this one may move to (docs/design.md §30): drawn as the FSM's graph edges by
   * `engine.graph(fsm)` and the dashboard. Each is a step of the same FSM or
   * {@link STEP_END} (`'$done'`: the instance may end here). Validated at boot
   * (ConfigurationError naming the FSM, the step and the missing target); not enforced when
   * the step runs. Default: undeclared (the graph draws no edges out of the step).
   */
  next?: readonly string[];
  /**
   * Run the step in a transaction on the engine's DataSource (docs/transactional-steps.md):
   * it receives `ctx.manager`, and its outcome commits in that same transaction, so its
   * writes through `ctx.manager` happen exactly once. A throw, a `retry` or a `stop` rolls
   * them back. Never run ahead inline nor group-committed. Default false.
   */
  transactional?: boolean;
}

/** The `next` target that marks a step after which the instance may end (done or stopped). */
export const STEP_END = '$done';

/** One `@Step()` as stored on its class: step name, method name, options. */
export type StepMetadata = readonly [name: string, property: string | symbol, options: StepOptions];

/**
 * Marks a method of a `@DurableFsm()` class as a step. The step name defaults to the method
 * name: `@Step()`, `@Step('name')`, `@Step({ timeout, next, transactional })` or `@Step('name', { … })`. The
 * method receives a `StepContext` and returns (or resolves to) an outcome.
 */
export function Step(nameOrOptions?: string | StepOptions, options?: StepOptions): MethodDecorator {
  const given = typeof nameOrOptions === 'object' ? nameOrOptions : (options ?? {});
  const name = typeof nameOrOptions === 'string' ? nameOrOptions : given.name;
  return (target, propertyKey) => {
    const ctor = target.constructor;
    const existing = (Reflect.getOwnMetadata(STEP_METADATA, ctor) as
      StepMetadata[] | undefined) ?? [
      ...((Reflect.getMetadata(STEP_METADATA, ctor) as StepMetadata[] | undefined) ?? []),
    ];
    existing.push([
      name ?? String(propertyKey),
      propertyKey,
      { ...given, ...(given.next ? { next: [...given.next] } : {}) },
    ]);
    Reflect.defineMetadata(STEP_METADATA, existing, ctor);
  };
}
