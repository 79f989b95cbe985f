import { DuplicateError } from '../errors/duplicate.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { UnknownStepError } from '../errors/unknown-step.error';
import { MAX_UNTIL_MS, MIN_UNTIL_MS } from '../fsm/outcome';
import { toJsonObjectText } from '../serialization/json-value';
import { GET_INSTANCE_BY_ID, GET_INSTANCE_BY_KEY } from '../sql/instance.sql';
import { RETRY_INSTANCE } from '../sql/retry.sql';
import { actorOf, manualRecord } from './instance-history';
import type { ControlRuntime } from './control-runtime';
import { type ResolvedTarget, targetLabel } from './target';

export type { RetryOptions } from './retry-options';

const KEYS = new Set(['step', 'state', 'at', 'detach', 'actor']);

/**
 * Makes a `failed` or `cancelled` row runnable again (docs/design.md §27.3): one read (the
 * row, to check the step against its FSM and to hand its state to a `state` function), then
 * RETRY_INSTANCE, guarded by the claim read, with its parent's barrier. Typed errors, nothing
 * changed: `NoTargetError` (no row), `InvalidInputError` (bad options, a live or done row, a
 * parent that moved on, a throwing `state` function), `UnknownStepError`, `DuplicateError`
 * (its correlation key is occupied again).
 */
export async function retryInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<void> {
  const o = retryInput(options);
  const row =
    'id' in target
      ? await GET_INSTANCE_BY_ID.run(runtime.sql, { id: target.id })
      : await GET_INSTANCE_BY_KEY.run(runtime.sql, { correlationKey: target.correlationKey });
  if (!row) throw new NoTargetError(targetLabel(target), 'nothing was retried');
  if (row.status !== 'failed' && row.status !== 'cancelled') {
    throw new InvalidInputError(
      'retry.target',
      `${row.fsm}#${row.id} is ${row.status}: only a failed or cancelled instance can be retried`,
    );
  }
  const definition = runtime.registry.find(row.fsm, row.fsmVersion);
  if (o.step !== undefined) {
    if (!definition) {
      throw new InvalidInputError(
        'retry.step',
        `FSM "${row.fsm}" version ${row.fsmVersion} is not registered on this node: its steps cannot be checked`,
      );
    }
    if (!definition.steps.has(o.step)) throw new UnknownStepError(row.fsm, o.step);
  }
  let stateText: string | null = null;
  if (o.state !== undefined) {
    let state: unknown = o.state;
    if (typeof o.state === 'function') {
      const current: unknown = definition?.codec ? definition.codec.load(row.state) : row.state;
      try {
        state = (o.state as (s: unknown) => unknown)(current);
      } catch (err) {
        throw new InvalidInputError(
          'retry.state',
          `the state function threw: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    const dumped = definition?.codec ? definition.codec.dump(state) : state;
    stateText = toJsonObjectText(dumped, 'retry.state', runtime.options.maxStateBytes);
  }
  let verdict;
  try {
    verdict = await RETRY_INSTANCE.run(runtime.sql, {
      id: row.id,
      claimSeq: row.claimSeq,
      step: o.step ?? null,
      stateText,
      at: o.at ?? null,
      detach: o.detach,
      record: manualRecord(definition?.history ?? 'failures'),
      actor: o.actor ?? null,
    });
  } catch (err) {
    if (isCorrelationConflict(err)) throw new DuplicateError(row.correlationKey ?? '');
    throw err;
  }
  switch (verdict.verdict) {
    case 'retried':
      runtime.telemetry.emit(
        'instance:retried',
        { count: 1 },
        { id: row.id, fsm: row.fsm, step: o.step ?? row.step },
      );
      if (verdict.due) runtime.pokes.poke([verdict.queue]);
      else if (o.at) runtime.wakeUps.arm(verdict.queue, o.at.getTime() - Date.now());
      return;
    case 'gone':
      throw new NoTargetError(targetLabel(target), 'nothing was retried');
    case 'status':
      throw new InvalidInputError(
        'retry.target',
        `${row.fsm}#${row.id} is ${verdict.status} (it changed while being retried): only a failed or cancelled instance can be retried`,
      );
    case 'parent':
      throw new InvalidInputError(
        'retry.detach',
        `the parent of ${row.fsm}#${row.id} is ${verdict.parentStatus ?? 'gone'} and no longer awaits its children: pass detach: true to retry it unlinked`,
      );
  }
}

function retryInput(options: unknown): {
  step: string | undefined;
  state: unknown;
  at: Date | undefined;
  detach: boolean;
  actor: string | undefined;
} {
  if (options === undefined) {
    return { step: undefined, state: undefined, at: undefined, detach: false, actor: undefined };
  }
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidInputError('retry.options', 'must be an object');
  }
  const o = options as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!KEYS.has(key)) {
      throw new InvalidInputError(
        `retry.options.${key}`,
        'is not an option (step, state, at, detach, actor)',
      );
    }
  }
  const step = o['step'];
  if (step !== undefined && (typeof step !== 'string' || step.length === 0)) {
    throw new InvalidInputError('retry.step', 'must be a non-empty string');
  }
  const at = o['at'];
  const atMs = at instanceof Date ? at.getTime() : NaN;
  if (at !== undefined && !(atMs >= MIN_UNTIL_MS && atMs <= MAX_UNTIL_MS)) {
    throw new InvalidInputError('retry.at', 'must be a valid Date in years 1 … 9999');
  }
  const detach = o['detach'] ?? false;
  if (typeof detach !== 'boolean') throw new InvalidInputError('retry.detach', 'must be a boolean');
  return {
    step: step,
    state: o['state'],
    at: at === undefined ? undefined : new Date(atMs),
    detach,
    actor: actorOf(o['actor'], 'retry.actor'),
  };
}

/** A unique violation of the correlation index: the key is occupied by another instance. */
function isCorrelationConflict(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'gen_durable_correlation';
}
