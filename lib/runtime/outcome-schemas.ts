import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { InvalidOutcomeError } from '../errors/invalid-outcome.error';
import { done, type ChildSpec, isOutcome, type Outcome, scheduleChildren } from '../fsm/outcome';
import { validateWithSchema } from '../fsm/schema-validation';

/**
 * An outcome validated against the schemas it reaches (docs/schemas.md): a `done(result)` of
 * an FSM with a result schema, and the state of each child a `scheduleChildren` spawns of an FSM
 * with a state schema. Answers `value` itself when no schema applies (no copy, no promise), else
 * the outcome rebuilt with the schemas' outputs (a promise when a schema is asynchronous). A
 * refused value throws `InvalidInputError` at `done.result…` / `scheduleChildren.children[i].state…`,
 * inside the executor's guarded region: a step throw, through `onError`.
 */
export function withSchemaOutputs(
  value: unknown,
  definition: FsmDefinition,
  registry: FsmRegistry,
): unknown {
  if (!isOutcome(value)) return value;
  if (value.kind === 'done') {
    if (definition.resultSchema === undefined) return value;
    const output = validateWithSchema(definition.resultSchema, value.result, 'done.result');
    return output instanceof Promise ? output.then(doneWith) : doneWith(output);
  }
  if (value.kind === 'scheduleChildren') return childrenValidated(value, registry);
  return value;
}

function doneWith(result: unknown): Outcome {
  return done(result as Record<string, unknown>);
}

type ScheduleOutcome = Extract<Outcome, { kind: 'scheduleChildren' }>;

/** `scheduleChildren` with each schema'd child's state replaced by its schema's output. */
function childrenValidated(outcome: ScheduleOutcome, registry: FsmRegistry): unknown {
  let pending: Promise<unknown>[] | undefined;
  let children: ChildSpec[] | undefined;
  outcome.children.forEach((given, i) => {
    if (typeof given !== 'function' && typeof given !== 'string') {
      if (typeof given !== 'object' || given === null) return; // refused by outcomeToEntry
    }
    const spec = typeof given === 'object' ? given : { fsm: given };
    const schema = registry.resolve(spec.fsm).stateSchema;
    if (schema === undefined) return;
    if (spec.state !== undefined && spec.args !== undefined) {
      throw new InvalidOutcomeError(
        `scheduleChildren.children[${i}]: give state or args, not both`,
      );
    }
    const { args, ...rest } = spec;
    const raw: unknown = spec.state ?? args ?? {};
    const output = validateWithSchema(schema, raw, `scheduleChildren.children[${i}].state`);
    children ??= [...outcome.children];
    const place = (state: unknown): void => {
      children![i] = { ...rest, state: state as Record<string, unknown> };
    };
    if (output instanceof Promise) (pending ??= []).push(output.then(place));
    else place(output);
  });
  if (children === undefined) return outcome;
  const rebuild = (): Outcome => scheduleChildren(outcome.step, children!, outcome.state);
  return pending === undefined ? rebuild() : Promise.all(pending).then(rebuild);
}
