import type { FsmRegistry } from '../discovery/fsm.registry';
import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { buildInsertRow } from '../instance/build-insert-row';
import { withTraceContext } from '../instance/insert-row';
import { READ_RECORDED_STATE, SET_FORKED_FROM } from '../sql/fork.sql';
import { INSERT_HISTORY } from '../sql/history.sql';
import { readResolved } from './read-target';
import type { ControlRuntime } from './control-runtime';
import { insertInstance } from './insert-instance';
import { flag, nonEmptyText, oneOf, optionsObject } from './input-checks';
import { actorOf } from './instance-history';
import { type ResolvedTarget, targetLabel } from './target';

export type { ForkOptions } from './fork-options';

const KEYS = ['step', 'state', 'fromHistory', 'version', 'actor', 'held'];
const VERSIONS = ['latest', 'same'] as const;

/** What a fork inserted: the new id, and its queue and dueness for the caller's poke. */
export interface ForkAnswer {
  readonly id: string;
  readonly queue: string;
  readonly due: boolean;
}

/**
 * Forks `target` (docs/design.md §28.3, "resume from here"): reads the source (and, with
 * `fromHistory`, the history row, which must be the source's and carry state), then inserts a
 * new instance of the same FSM — the newest registered version, or the source's with
 * `version: 'same'` — through the insert path (`buildInsertRow`: step checked, state policies;
 * INSERT_INSTANCE: limits, trace context) and marks it `forked_from` the source, both in one
 * transaction. The fork keeps the source's queue, priority, concurrency key, rate limit and
 * weight, and no correlation key (the source may still hold it; so no dedup window either);
 * `held: true` inserts it held. The source is untouched.
 * Typed errors, nothing written: `NoTargetError` (no source), `InvalidInputError` (bad options,
 * a history row that is missing, another instance's or without state, a throwing `state`
 * function), `FsmNotRegisteredError`, `UnknownStepError`.
 */
export async function forkInstance(
  runtime: ControlRuntime,
  registry: Pick<FsmRegistry, 'resolve' | 'find'>,
  target: ResolvedTarget,
  options: unknown,
  traceContext: string | null,
): Promise<ForkAnswer> {
  const o = forkInput(options);
  const source = await readResolved(runtime.sql, target);
  if (!source) throw new NoTargetError(targetLabel(target), 'nothing was forked');
  const sourceDefinition = registry.find(source.fsm, source.fsmVersion);
  const definition = o.sameVersion ? sourceDefinition : registry.resolve(source.fsm);
  if (!definition) {
    throw new FsmNotRegisteredError(source.fsm, source.fsmVersion);
  }
  let stored: Record<string, unknown> = source.state;
  let step = source.step;
  if (o.fromHistory !== undefined) {
    const recorded = await READ_RECORDED_STATE.run(runtime.sql, {
      historyId: o.fromHistory,
      instanceId: source.id,
    });
    if (!recorded || recorded.instanceId !== source.id) {
      throw new InvalidInputError(
        'fork.fromHistory',
        `${source.fsm}#${source.id} has no history row ${o.fromHistory}`,
      );
    }
    if (recorded.state === null) {
      throw new InvalidInputError(
        'fork.fromHistory',
        `history row ${o.fromHistory} (${recorded.kind}) recorded no state: only FSMs with history 'full' record it`,
      );
    }
    stored = recorded.state;
    if (recorded.step !== null) step = recorded.step;
  }
  const decode = (s: Record<string, unknown>): unknown =>
    sourceDefinition?.codec ? sourceDefinition.codec.load(s) : s;
  let state: unknown = decode(stored);
  if (o.state !== undefined) {
    if (typeof o.state === 'function') {
      try {
        state = (o.state as (s: unknown) => unknown)(state);
      } catch (err) {
        throw new InvalidInputError(
          'fork.state',
          `the state function threw: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    } else {
      state = o.state;
    }
  }
  const row = withTraceContext(
    buildInsertRow(
      definition,
      {
        state: state as Record<string, unknown>,
        step: o.step ?? step,
        queue: source.queue,
        priority: source.priority,
        ...(source.concurrencyKey !== null && { concurrencyKey: source.concurrencyKey }),
        ...(source.rateLimit !== null && { rateLimit: source.rateLimit, weight: source.weight }),
        ...(o.held && { held: true }),
      },
      runtime.options,
      'fork',
    ),
    traceContext,
  );
  const answer = await runtime.sql.transaction(async (tx) => {
    const inserted = await insertInstance(runtime, row, { mode: 'error' }, tx);
    await SET_FORKED_FROM.run(runtime.sql, { id: inserted.id, forkedFrom: source.id }, tx);
    if (definition.history !== 'off') {
      await INSERT_HISTORY.run(
        runtime.sql,
        {
          rows: [
            {
              instanceId: inserted.id,
              kind: 'manual.fork',
              step: row.step,
              nextStep: null,
              attempt: null,
              claimSeq: null,
              worker: null,
              outcome: `forked from #${source.id}`,
              errorText: null,
              withState: definition.history === 'full',
              actor: o.actor ?? null,
            },
          ],
        },
        tx,
      );
    }
    return inserted;
  });
  runtime.telemetry.emit(
    'instance:forked',
    { count: 1 },
    { id: answer.id, fsm: definition.name, step: row.step, from: source.id },
  );
  return { id: answer.id, queue: answer.queue, due: answer.due };
}

function forkInput(options: unknown): {
  step: string | undefined;
  state: unknown;
  fromHistory: string | undefined;
  sameVersion: boolean;
  actor: string | undefined;
  held: boolean;
} {
  const o = optionsObject(options, KEYS, 'fork.options') ?? {};
  const step = nonEmptyText(o['step'], 'fork.step');
  const raw = o['fromHistory'];
  const fromHistory = typeof raw === 'bigint' ? raw.toString() : raw;
  if (
    fromHistory !== undefined &&
    (typeof fromHistory !== 'string' || !/^[1-9][0-9]{0,18}$/.test(fromHistory))
  ) {
    throw new InvalidInputError('fork.fromHistory', 'must be a history row id (string or bigint)');
  }
  if (fromHistory !== undefined && o['state'] !== undefined) {
    throw new InvalidInputError('fork.state', 'give state or fromHistory, not both');
  }
  const version = oneOf(o['version'] ?? 'latest', VERSIONS, 'fork.version');
  const actor = actorOf(o['actor'], 'fork.actor');
  return {
    actor: actor,
    step: step,
    state: o['state'],
    fromHistory: fromHistory,
    sameVersion: version === 'same',
    held: flag(o['held'], 'fork.held'),
  };
}
