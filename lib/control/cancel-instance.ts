import type { PoolClient } from 'pg';

import { actorOf } from './instance-history';
import { isTransient } from '../db/sql-executor';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { limitName } from '../fsm/limit-key';
import { assertNever } from '../fsm/outcome-kinds';
import type { LimiterSlot } from '../limiter/limiter.interface';
import {
  CANCEL_INSTANCES,
  type CancelChildren,
  type CancelledRow,
  type CancelRequest,
} from '../sql/cancel.sql';
import { CONSUME_INBOXES } from '../sql/outcome.sql';
import type { ControlRuntime } from './control-runtime';
import type { CancelMode, CancelOptions, CancelResult } from './cancel-options';
import { oneOf, optionsObject } from './input-checks';
import { readResolved } from './read-target';
import { type ResolvedTarget, targetLabel } from './target';

export type { CancelMode, CancelOptions, CancelResult } from './cancel-options';

const MAX_REASON_BYTES = 8 * 1024;
/** A cascade runs rounds until nothing moved under it; a tree spawning that fast is a bug. */
const MAX_ROUNDS = 100;
/** Attempts of one round against transient errors (a deadlock with a flush, a blip). */
const ROUND_ATTEMPTS = 5;
const CHILDREN_MODES: readonly CancelChildren[] = ['cascade', 'detach', 'keep'];
const MODES: readonly CancelMode[] = ['cooperative', 'fence'];

/** Validated options, or `InvalidInputError` naming the bad field. */
export function cancelInput(options: unknown): Required<Omit<CancelOptions, 'reason' | 'actor'>> & {
  reason: string | null;
  actor: string | null;
} {
  if (options === undefined) {
    return { reason: null, children: 'cascade', mode: 'cooperative', actor: null };
  }
  const o = optionsObject(options, ['reason', 'children', 'mode', 'actor'], 'cancel.options') ?? {};
  const reason = o['reason'];
  if (reason !== undefined && typeof reason !== 'string') {
    throw new InvalidInputError('cancel.reason', 'must be a string');
  }
  if (reason !== undefined && Buffer.byteLength(reason) > MAX_REASON_BYTES) {
    throw new InvalidInputError('cancel.reason', `must be at most ${MAX_REASON_BYTES} bytes`);
  }
  const children = oneOf(o['children'] ?? 'cascade', CHILDREN_MODES, 'cancel.children');
  const mode = oneOf(o['mode'] ?? 'cooperative', MODES, 'cancel.mode');
  return {
    reason: reason ?? null,
    children,
    mode,
    actor: actorOf(o['actor'], 'cancel.actor') ?? null,
  };
}

/** Every row of every round of one cancel, in order. */
export interface CancelRounds {
  readonly root: CancelledRow | undefined;
  readonly rows: readonly CancelledRow[];
}

/**
 * The rounds of one cancel (docs/design.md §27.2): one CANCEL_INSTANCES statement; a cascade
 * whose tree moved under that statement (a descendant's spawn committed between its snapshot
 * and its lock, so its children were not in the snapshot) runs further rounds over the
 * target's descendants until nothing moved. Each round is one statement that commits on its
 * own; once a round saw nothing move, every tree row was locked while its children were read,
 * so a later spawn waits for the cancel and then sees the request (the guarded spawn): no live
 * child of the tree is left when this returns. `runRound` runs one statement.
 */
export async function cancelRounds(
  runRound: (request: CancelRequest) => Promise<CancelledRow[]>,
  request: CancelRequest,
  sweepInboxes: (ids: string[]) => Promise<void>,
): Promise<CancelRounds> {
  const all: CancelledRow[] = [];
  let rows = await runRound(request);
  const root = rows.find((r) => r.isTarget);
  if (!root) return { root, rows };
  for (let round = 1; ; round++) {
    all.push(...rows);
    // A delivery that committed while the round waited for a row's lock stored a signal the
    // round's snapshot could not see (see CANCEL_INSTANCES): sweep those inboxes again.
    const late = rows.filter((r) => r.action === 'cancelled' && r.moved && r.signaled);
    if (late.length > 0) await sweepInboxes(late.map((r) => r.id));
    const rootActed = root.action === 'cancelled' || root.action === 'requested';
    const moved = rows.some((r) => r.moved);
    if (!rootActed || request.children !== 'cascade' || !moved || round >= MAX_ROUNDS) break;
    rows = await runRound({ ...request, targetId: root.id, descendantsOnly: true });
  }
  return { root, rows: all };
}

/**
 * Cancels `target` (docs/design.md §27.2) by {@link cancelRounds}; then, after commit: fenced
 * gate slots credited, waiters nudged, woken parents' queues poked. `NoTargetError` for a
 * missing target.
 */
export async function cancelInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<CancelResult> {
  const input = cancelInput(options);
  const outcome = await runCancel(runtime, {
    targetId: 'id' in target ? target.id : null,
    correlationKey: 'id' in target ? null : target.correlationKey,
    reason: input.reason,
    children: input.children,
    fence: input.mode === 'fence',
    descendantsOnly: false,
    onlyFsms: null,
    actor: input.actor,
  });
  if (outcome) return outcome;
  // An archived instance (docs/archive.md) has ended: answered as an ended hot row is.
  const archived = await readResolved(runtime.sql, target);
  if (archived) return { cancelled: [], requested: [], alreadyTerminal: [archived.id] };
  throw new NoTargetError(targetLabel(target), 'nothing was cancelled');
}

/**
 * One cancel by `request`: its rounds (on `client`, the caller's transaction, when given),
 * then the after-commit effects (skipped inside a caller's transaction, whose commit is not
 * seen here: a fenced slot is then repaired by the GC reconcile, waiters by their probe).
 * Null when no target answered.
 */
export async function runCancel(
  runtime: ControlRuntime,
  request: CancelRequest,
  client?: PoolClient,
): Promise<CancelResult | null> {
  const { root, rows } = await cancelRounds(
    (r) => runRound(runtime, r, client),
    request,
    (ids) => CONSUME_INBOXES.run(runtime.sql, { ids }, client),
  );
  if (!root) return null;
  const result = summarize(rows);
  if (client === undefined) afterCancel(runtime, rows);
  runtime.telemetry.emit(
    'instance:cancelled',
    {
      cancelled: result.cancelled.length,
      requested: result.requested.length,
      alreadyTerminal: result.alreadyTerminal.length,
    },
    { id: root.id, mode: request.fence ? 'fence' : 'cooperative', children: request.children },
  );
  return result;
}

/** The ids of the rounds' rows by what happened to them (a row cancelled in a later round after a request counts as cancelled). */
export function summarize(rows: readonly CancelledRow[]): CancelResult {
  const cancelled = new Set<string>();
  const requested = new Set<string>();
  const alreadyTerminal: string[] = [];
  for (const row of rows) {
    switch (row.action) {
      case 'cancelled':
        cancelled.add(row.id);
        requested.delete(row.id);
        break;
      case 'requested':
        if (!cancelled.has(row.id)) requested.add(row.id);
        break;
      case 'terminal':
        alreadyTerminal.push(row.id);
        break;
      case 'woken':
      case 'none':
        break;
      default:
        assertNever(row.action, 'cancel action');
    }
  }
  return { cancelled: [...cancelled], requested: [...requested], alreadyTerminal };
}

/**
 * The FSMs whose history level is `'off'` (no `manual.cancel` row) and `'full'` (a row with the
 * state), as the cancel statements take them (docs/design.md §28.1). An FSM this node does not
 * know records at the default level.
 */
export function historyLevels(runtime: ControlRuntime): {
  historyOff: string[];
  historyFull: string[];
} {
  const historyOff: string[] = [];
  const historyFull: string[] = [];
  for (const d of runtime.registry.all()) {
    if (d.name === undefined) continue;
    if (d.history === 'off') historyOff.push(d.name);
    else if (d.history === 'full') historyFull.push(d.name);
  }
  return { historyOff, historyFull };
}

/** One row a cancel statement (CANCEL_INSTANCES, CANCEL_BATCH) answered, as its effects need it. */
export type CancelEffect = Pick<
  CancelledRow,
  'id' | 'queue' | 'prior' | 'concurrencyKey' | 'concurrencyShard'
> & { readonly action: string };

/**
 * The after-commit effects of the rows one or more cancel statements answered (single cancel
 * and `cancelAll` alike): the gate slots of executing rows cancelled now under `fence`
 * credited, the waiters of the rows cancelled now nudged, the queues of the parents the cancels
 * woke poked.
 */
export function afterCancel(runtime: ControlRuntime, rows: readonly CancelEffect[]): void {
  const slots: LimiterSlot[] = [];
  const cancelled = new Set<string>();
  const pokeQueues = new Set<string>();
  for (const row of rows) {
    if (row.action === 'cancelled') {
      cancelled.add(row.id);
      if (row.prior === 'executing') {
        const slot = gateSlot(runtime, row);
        if (slot) slots.push(slot);
      }
    }
    if (row.action === 'woken') pokeQueues.add(row.queue);
  }
  if (slots.length > 0) void runtime.limiter.credit(slots);
  if (cancelled.size > 0) runtime.watcher.nudge([...cancelled]);
  if (pokeQueues.size > 0) runtime.pokes.poke(pokeQueues);
}

/**
 * One round, retried on transient errors when it is one autocommit statement (inside a
 * caller's transaction an error aborts that transaction: it is the caller's to retry).
 */
async function runRound(
  runtime: ControlRuntime,
  request: CancelRequest,
  client: PoolClient | undefined,
): Promise<CancelledRow[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await CANCEL_INSTANCES.run(
        runtime.sql,
        { ...request, ...historyLevels(runtime) },
        client,
      );
    } catch (err) {
      if (client !== undefined || !isTransient(err) || attempt >= ROUND_ATTEMPTS) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt * Math.random()));
    }
  }
}

/** The gate slot a fenced executing row held, when its key names a configured gate. */
export function gateSlot(
  runtime: ControlRuntime,
  row: Pick<CancelledRow, 'id' | 'concurrencyKey' | 'concurrencyShard'>,
): LimiterSlot | null {
  if (row.concurrencyKey === null || row.concurrencyShard === null) return null;
  if (runtime.options.concurrencyLimits[limitName(row.concurrencyKey)] === undefined) return null;
  return { key: row.concurrencyKey, shard: row.concurrencyShard, id: row.id };
}
