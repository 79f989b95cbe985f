import { DuplicateError } from '../errors/duplicate.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { UnknownStepError } from '../errors/unknown-step.error';
import { toJsonObjectText } from '../serialization/json-value';
import { readResolved } from './read-target';
import { RETRY_INSTANCES, type RetriedRow, type RetryVerdict } from '../sql/retry.sql';
import { actorOf, manualRecord } from './instance-history';
import type { ControlRuntime } from './control-runtime';
import { dueDate, flag, nonEmptyText, optionsObject } from './input-checks';
import { type ResolvedTarget, targetLabel } from './target';

export type { RetryOptions } from './retry-options';

const KEYS = ['step', 'state', 'at', 'detach', 'actor'];

/**
 * Makes a `failed` or `cancelled` row runnable again, or — one that ended parked on signals,
 * without a `step` — parks it again on the same signals, timeout re-armed (docs/design.md
 * §27.3): one read (the
 * row, to check the step against its FSM and to hand its state to a `state` function), then
 * {@link runRetry} (RETRY_INSTANCES over that one row), guarded by the claim read, with its
 * parent's barrier. Typed errors, nothing changed: `NoTargetError` (no row), `InvalidInputError`
 * (bad options, a live or done row, a parent that moved on, a throwing `state` function),
 * `UnknownStepError`, `DuplicateError` (its correlation key is occupied again).
 */
export async function retryInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<void> {
  const o = retryInput(options);
  const row = await readResolved(runtime.sql, target);
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
  const verdicts = await runRetry(runtime, [row], {
    step: o.step ?? null,
    stateText,
    at: o.at ?? null,
    detach: o.detach,
    actor: o.actor ?? null,
  });
  const verdict = verdicts.get(row.id) ?? { verdict: 'gone' };
  switch (verdict.verdict) {
    case 'retried':
      return;
    case 'gone':
      throw new NoTargetError(targetLabel(target), 'nothing was retried');
    case 'duplicate':
      throw new DuplicateError(row.correlationKey ?? '');
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

/** A row to retry, as it was read: its claim token, and what its history and telemetry name. */
export interface RetryCandidate {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly claimSeq: string;
}

/** What every row of one {@link runRetry} is retried with. */
export interface RetryChange {
  readonly step: string | null;
  readonly stateText: string | null;
  readonly at: Date | null;
  readonly detach: boolean;
  readonly actor: string | null;
}

/**
 * What became of one row: RETRY_INSTANCES' verdict, `gone` (no such row: collected by GC
 * meanwhile), or `duplicate` (its correlation key is occupied again; nothing written).
 */
export type RetryOutcome =
  RetryVerdict | { readonly verdict: 'gone' } | { readonly verdict: 'duplicate' };

/**
 * Retries `rows` — one for `retry`, a batch of at most 1 000 for `retryAll` — by one
 * RETRY_INSTANCES statement, and interprets its answer: each retried row's `instance:retried`,
 * the queues of the rows due now poked, a later `at` armed as a wake-up, the deadline of a row
 * parked again on its signals armed on the local await-deadline timer (the reaper's sweep is the
 * floor, docs/design.md §8.5). A re-occupied
 * correlation key fails the whole statement (nothing written): a batch is then retried row by
 * row, and the row whose key is taken answers `duplicate`. Each row's history record follows
 * its FSM version's level (docs/design.md §28.1; an FSM version this node does not know records
 * at the default level). Answers every row's outcome by id.
 */
export async function runRetry(
  runtime: ControlRuntime,
  rows: readonly RetryCandidate[],
  change: RetryChange,
): Promise<Map<string, RetryOutcome>> {
  const outcomes = new Map<string, RetryOutcome>();
  for (const row of rows) outcomes.set(row.id, { verdict: 'gone' });
  for (const answered of await retryRows(runtime, rows, change)) {
    outcomes.set(answered.id, answered);
  }
  const pokeQueues = new Set<string>();
  for (const row of rows) {
    const outcome = outcomes.get(row.id);
    if (outcome?.verdict !== 'retried') continue;
    runtime.telemetry.emit(
      'instance:retried',
      { count: 1 },
      { id: row.id, fsm: row.fsm, step: change.step ?? row.step },
    );
    if (outcome.parked) {
      if (outcome.deadlineInMs !== null) runtime.awaitDeadlines.arm('', outcome.deadlineInMs);
    } else if (outcome.due) pokeQueues.add(outcome.queue);
    else if (change.at) runtime.wakeUps.arm(outcome.queue, change.at.getTime() - Date.now());
  }
  if (pokeQueues.size > 0) runtime.pokes.poke(pokeQueues);
  return outcomes;
}

/** One RETRY_INSTANCES over `rows`; on a key conflict, row by row (a conflicting row: `duplicate`). */
async function retryRows(
  runtime: ControlRuntime,
  rows: readonly RetryCandidate[],
  change: RetryChange,
): Promise<(RetriedRow | { readonly id: string; readonly verdict: 'duplicate' })[]> {
  try {
    return await RETRY_INSTANCES.run(runtime.sql, {
      rows: rows.map((r) => ({
        id: r.id,
        claimSeq: r.claimSeq,
        record: manualRecord(runtime.registry.find(r.fsm, r.fsmVersion)?.history ?? 'failures'),
      })),
      ...change,
    });
  } catch (err) {
    if (!isCorrelationConflict(err)) throw err;
    const [only] = rows;
    if (rows.length === 1 && only) return [{ id: only.id, verdict: 'duplicate' }];
    const answers = [];
    for (const row of rows) answers.push(...(await retryRows(runtime, [row], change)));
    return answers;
  }
}

function retryInput(options: unknown): {
  step: string | undefined;
  state: unknown;
  at: Date | undefined;
  detach: boolean;
  actor: string | undefined;
} {
  const o = optionsObject(options, KEYS, 'retry.options') ?? {};
  return {
    step: nonEmptyText(o['step'], 'retry.step'),
    state: o['state'],
    at: dueDate(o['at'], 'retry.at'),
    detach: flag(o['detach'], 'retry.detach'),
    actor: actorOf(o['actor'], 'retry.actor'),
  };
}

/** A unique violation of the correlation index: the key is occupied by another instance. */
function isCorrelationConflict(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'gen_durable_correlation';
}
