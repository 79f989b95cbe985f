import type { PoolClient } from 'pg';

import type { DurableStatus } from '../gen-durable.constants';
import type { InstanceView } from '../instance/instance-view';
import { sql, type StatementRunner } from './statement';

/** An instance's id and status (PROBE_STATUSES). */
export interface InstanceStatus {
  readonly id: string;
  readonly status: DurableStatus;
}

/** Every column of an instance row, as `InstanceView` decodes it (shared with lib/sql/query.sql.ts). */
export const INSTANCE_COLUMNS = `id, fsm, fsm_version, step, status, state, result, last_error, attempt, awaits,
       await_deadline, queue, priority, eligible_at, concurrency_key, concurrency_shard, rate_limit,
       weight, locked_by, lease_expires_at, parent_id, children_pending, correlation_key,
       correlation_scope::text[] AS correlation_scope, claim_seq, reaps, cancel_requested_at, cancel_reason, inserted_at, updated_at,
       progress->'value' AS progress, progress_at, forked_from, held_at, held_reason, dedup_until,
       deadline_at`;

/**
 * One instance by id in the hot table (primary key). Most reads are of live or recently ended
 * instances, which are all here; {@link readInstanceById} asks the archive only on a miss. Not
 * the view gen_durable_all: a statement over it opens and locks every archive partition and its
 * index (26 of each with the default retention, past the 16 fast-path lock slots) on every
 * execution, found in the hot table or not.
 */
export const GET_INSTANCE_BY_ID = sql(
  'get_instance_by_id',
  `SELECT ${INSTANCE_COLUMNS} FROM {schema}.gen_durable WHERE id = $1`,
  { params: (i: { readonly id: string }) => [i.id], decode: firstInstance },
);

/**
 * One archived instance by id (docs/archive.md): gen_durable_archive_id in each partition (the
 * archive is partitioned by expiry, so no partition is pruned by id).
 */
export const GET_ARCHIVED_INSTANCE_BY_ID = sql(
  'get_archived_instance_by_id',
  `SELECT ${INSTANCE_COLUMNS} FROM {schema}.gen_durable_archive WHERE id = $1 LIMIT 1`,
  { params: (i: { readonly id: string }) => [i.id], decode: firstInstance },
);

/**
 * One instance by id, hot or archived: GET_INSTANCE_BY_ID, then GET_ARCHIVED_INSTANCE_BY_ID
 * only when the hot table has no such id (one statement for a hot row, two for an archived or
 * unknown one). An instance is in exactly one of the two tables at any snapshot and never moves
 * back, so a hot miss followed by an archive read cannot miss a row that existed at the first.
 * `on`: in the caller's transaction.
 */
export async function readInstanceById(
  runner: StatementRunner,
  id: string,
  on?: PoolClient,
): Promise<InstanceView | null> {
  return (
    (await GET_INSTANCE_BY_ID.run(runner, { id }, on)) ??
    GET_ARCHIVED_INSTANCE_BY_ID.run(runner, { id }, on)
  );
}

/** The live statuses, written as gen_durable_gc's predicate negates them (lib/schema/v005.ts). */
const LIVE_STATUSES = `('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`;

/**
 * The id of the instance a correlation key `param` addresses for reads and manual actions
 * (docs/identity.md "Finding an instance by key"), a scalar subquery:
 * 1. the key's current occupant (unique index gen_durable_correlation on `correlation_guard`):
 *    the live instance, or a finished holder under a terminal-inclusive scope;
 * 2. else the instance that ended most recently with that key among those whose scope was
 *    not empty (an empty scope is a label, never an address): gen_durable_ended_key
 *    (correlation_key, updated_at) WHERE not live AND correlation_key IS NOT NULL (version 14,
 *    built online), read backward from the key's newest end; the empty-scope rows of the key
 *    are filtered there. The second branch runs only when the first finds nothing. It reads
 *    the view gen_durable_all: the archive's rows too, through gen_durable_archive_key
 *    `(correlation_key, updated_at)` (docs/archive.md). An occupant is never archived
 *    (ARCHIVE_MOVE), so the first branch reads the hot table only.
 * Signals never use it: they go to the occupant only, and only while it is live (DELIVER_SIGNAL).
 */
export function keyTargetId(param: string): string {
  return `(SELECT k.id FROM (
       (SELECT o.id FROM {schema}.gen_durable o WHERE o.correlation_guard = ${param}::text)
       UNION ALL
       (SELECT e.id FROM {schema}.gen_durable_all e
         WHERE e.status NOT IN ${LIVE_STATUSES}
           AND e.correlation_key = ${param}::text AND cardinality(e.correlation_scope) > 0
         ORDER BY e.updated_at DESC LIMIT 1)
     ) k LIMIT 1)`;
}

/**
 * The instance a correlation key addresses (`get`, `retry`, `fork` by key; docs/design.md §11):
 * the live occupant wins, else the most recent ended instance with that key
 * ({@link keyTargetId}: gen_durable_correlation, then gen_durable_ended_key), then the row by PK.
 * Null when no instance with a non-empty scope carries the key (never inserted, or collected).
 */
export const GET_INSTANCE_BY_KEY = sql(
  'get_instance_by_key',
  `SELECT ${INSTANCE_COLUMNS} FROM {schema}.gen_durable_all WHERE id = ${keyTargetId('$1')} LIMIT 1`,
  {
    params: (i: { readonly correlationKey: string }) => [i.correlationKey],
    decode: firstInstance,
  },
);

/**
 * The current occupant of a correlation key (unique index gen_durable_correlation),
 * docs/design.md §2.5, §11: the row whose status is in its key's scope — with the default
 * (live) scope the live instance only, with a terminal-inclusive scope a finished holder until
 * GC. A freed key finds nothing. What an insert with `onConflict: 'return'` answers when its
 * own statement saw no holder (lib/control/insert-instance.ts).
 */
export const GET_KEY_OCCUPANT = sql(
  'get_key_occupant',
  `SELECT ${INSTANCE_COLUMNS} FROM {schema}.gen_durable WHERE correlation_guard = $1`,
  {
    params: (i: { readonly correlationKey: string }) => [i.correlationKey],
    decode: firstInstance,
  },
);

/**
 * Await probe (docs/design.md §9): status of many ids at once in the hot table (primary key).
 * An id it does not answer (archived, or gone) wakes its waiter, whose re-read
 * ({@link readInstanceById}) finds it in the archive: the probe, run every tick while anyone
 * waits, never opens the archive's partitions.
 */
export const PROBE_STATUSES = sql(
  'probe_statuses',
  `SELECT id, status FROM {schema}.gen_durable WHERE id = ANY ($1::bigint[])`,
  {
    params: (i: { readonly ids: readonly string[] }) => [i.ids],
    decode: (rows: readonly InstanceStatus[]) => rows,
  },
);

/** An instance row as INSTANCE_COLUMNS reads it. */
export interface InstanceRecord {
  id: string;
  fsm: string;
  fsm_version: number;
  step: string;
  status: DurableStatus;
  state: Record<string, unknown>;
  result: Record<string, unknown> | null;
  last_error: string | null;
  attempt: number;
  awaits: string[] | null;
  await_deadline: Date | null;
  queue: string;
  priority: number;
  eligible_at: Date;
  concurrency_key: string | null;
  concurrency_shard: number | null;
  rate_limit: string | null;
  weight: number;
  locked_by: string | null;
  lease_expires_at: Date | null;
  parent_id: string | null;
  children_pending: number;
  correlation_key: string | null;
  correlation_scope: DurableStatus[];
  claim_seq: string;
  reaps: number;
  cancel_requested_at: Date | null;
  cancel_reason: string | null;
  inserted_at: Date;
  updated_at: Date;
  progress: unknown;
  progress_at: Date | null;
  forked_from: string | null;
  held_at: Date | null;
  held_reason: string | null;
  dedup_until: Date | null;
  deadline_at: Date | null;
}

/** One raw instance row as the public, frozen `InstanceView`. */
export function toInstanceView(r: InstanceRecord): InstanceView {
  return Object.freeze({
    id: r.id,
    fsm: r.fsm,
    fsmVersion: r.fsm_version,
    step: r.step,
    status: r.status,
    state: r.state,
    result: r.result,
    lastError: r.last_error,
    attempt: r.attempt,
    awaits: r.awaits,
    awaitDeadline: r.await_deadline,
    queue: r.queue,
    priority: r.priority,
    eligibleAt: r.eligible_at,
    concurrencyKey: r.concurrency_key,
    concurrencyShard: r.concurrency_shard,
    rateLimit: r.rate_limit,
    weight: r.weight,
    lockedBy: r.locked_by,
    leaseExpiresAt: r.lease_expires_at,
    parentId: r.parent_id,
    childrenPending: r.children_pending,
    correlationKey: r.correlation_key,
    correlationScope: r.correlation_scope,
    claimSeq: r.claim_seq,
    reaps: r.reaps,
    cancelRequestedAt: r.cancel_requested_at,
    cancelReason: r.cancel_reason,
    insertedAt: r.inserted_at,
    updatedAt: r.updated_at,
    progress: r.progress ?? null,
    progressAt: r.progress_at,
    forkedFrom: r.forked_from,
    heldAt: r.held_at,
    heldReason: r.held_reason,
    dedupUntil: r.dedup_until,
    deadline: r.deadline_at,
  });
}

/** The one row of a by-id or by-key read as an `InstanceView`, or null when there is none. */
function firstInstance(rows: readonly InstanceRecord[]): InstanceView | null {
  const row = rows[0];
  return row ? toInstanceView(row) : null;
}
