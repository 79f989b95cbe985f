import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** One row RETRY_INSTANCES is asked to retry. */
export interface RetryTarget {
  readonly id: string;
  /** The row's `claim_seq` when it was read: a row changed since then is not touched. */
  readonly claimSeq: string;
  /** Its history row (docs/design.md §28.1): 0 none (level `'off'`), 1 a row, 2 with the state. */
  readonly record: 0 | 1 | 2;
}

/** What RETRY_INSTANCES is asked to do (docs/design.md §27.3, §27.7). */
export interface RetryRequest {
  /** One row (`retry`) or one batch of at most 1 000 (`retryAll`). */
  readonly rows: readonly RetryTarget[];
  /** The step to resume at, or null to keep each row's. */
  readonly step: string | null;
  /** The new state as JSON text, or null to keep each row's. */
  readonly stateText: string | null;
  /** When they become due, or null for now (database clock). */
  readonly at: Date | null;
  /** Unlink a row from a parent that no longer awaits its children instead of refusing. */
  readonly detach: boolean;
  /** Who asked (the history rows' `actor`), or null. */
  readonly actor: string | null;
}

/**
 * What RETRY_INSTANCES answered for one row it found: `retried`; `status` (the row is not
 * failed or cancelled, or changed since it was read: `status` names it); `parent` (its parent
 * no longer awaits children: `parentStatus` names what it is). A row it did not find (collected
 * by GC meanwhile) answers nothing.
 */
export type RetryVerdict =
  | {
      readonly verdict: 'retried';
      readonly queue: string;
      /** Runnable and due now (its queue is poked). */
      readonly due: boolean;
      /** Parked again on the signals it awaited (docs/design.md §27.3). */
      readonly parked: boolean;
      /** A re-armed await deadline: how far ahead, ms; null: none. */
      readonly deadlineInMs: number | null;
    }
  | { readonly verdict: 'status'; readonly status: DurableStatus }
  | { readonly verdict: 'parent'; readonly parentStatus: DurableStatus | null };

/** One row RETRY_INSTANCES answered for. */
export type RetriedRow = { readonly id: string } & RetryVerdict;

interface RetryRecord {
  id: string;
  verdict: 'retried' | 'status' | 'parent';
  status: DurableStatus;
  parent_status: DurableStatus | null;
  queue: string | null;
  due: boolean | null;
  parked: boolean | null;
  deadline_in_ms: number | null;
}

/**
 * Manual retry of one row or of a batch, one statement (docs/design.md §27.3, §27.7): `$1`
 * ids, `$2` the `claim_seq` each was read with, `$3` each row's history record (0 / 1 / 2).
 * Every `failed` or `cancelled` row whose `claim_seq` is still the one read becomes runnable at
 * step `$4` (NULL: its own) with state `$5` (NULL: its own), due at `$6` (NULL: now), `attempt`
 * and `reaps` reset, the cancel request and the claim cleared, an instance deadline that has
 * passed cleared (docs/operations-control.md "Instance deadlines": else the deadline would end
 * the retried row at once; one still ahead is kept); `last_error` and progress are kept; a row changed since it was read is answered `status`, untouched. A row that ended while
 * parked on signals (it still carries `awaits`: cancel keeps them, with the deadline, only on a
 * parked row) is parked again when `$4` is NULL: `awaiting_signal` on the same awaits, its
 * deadline re-armed from `$6` (NULL: now) with the original timeout (the old deadline minus the
 * old `eligible_at`, which parking set to the park time; `eligible_at` becomes the new park
 * time, so the difference holds for the next retry); as the park's lost-wakeup recheck
 * (RECHECK_PARKS), an unconsumed matching signal in its inbox makes it runnable instead. With a
 * `$4` step the row runs that step, nothing awaited. The rows and their
 * parents are locked in id order by primary key (`= ANY (ARRAY(…))` keeps a batch of 1 000 on
 * gen_durable_pkey, where `IN (… UNION …)` let the planner hash-join a scan of the table). A
 * parent still awaiting children has its barrier re-incremented by the number of its children
 * retried, in the same statement; a row whose parent moved on is refused (`parent`) unless `$7`
 * (detach), which sets parent_id NULL. A retried row is never a parent being re-incremented (a
 * parent awaiting children is not failed or cancelled), so each row is written once. A
 * re-occupied correlation key raises the unique violation of gen_durable_correlation for the
 * whole statement (nothing written): the caller retries a batch row by row and answers that row
 * as a duplicate. A retry racing GC's delete either runs first (GC_DELETE re-checks terminality
 * and skips the row) or finds no row (no answer for it). Each retried row writes its history
 * row (kind `manual.retry`, actor `$8`; with the state when its record is 2) in the same
 * statement, unless its record is 0 (level `'off'`).
 */
export const RETRY_INSTANCES = sql(
  'retry_instances',
  `WITH target AS (
     SELECT t.id, t.seq, t.record, g.parent_id
       FROM unnest($1::bigint[], $2::bigint[], $3::int[]) AS t(id, seq, record)
       JOIN {schema}.gen_durable g ON g.id = t.id
   ), locked AS (
     SELECT g.id, g.status, g.claim_seq, g.parent_id, g.step, g.attempt, g.awaits
       FROM {schema}.gen_durable g
      WHERE g.id = ANY (ARRAY(SELECT id FROM target UNION SELECT parent_id FROM target WHERE parent_id IS NOT NULL))
      ORDER BY g.id
        FOR NO KEY UPDATE OF g
   ), verdict AS (
     SELECT r.id, r.status, p.status AS parent_status, t.record, r.step AS old_step, r.attempt AS old_attempt,
            CASE WHEN r.status NOT IN ('failed', 'cancelled') OR r.claim_seq <> t.seq THEN 'status'
                 WHEN r.parent_id IS NOT NULL AND p.status IS DISTINCT FROM 'awaiting_children' AND NOT $7::boolean
                   THEN 'parent'
                 ELSE 'retried' END AS verdict,
            r.parent_id IS NOT NULL AND p.status IS DISTINCT FROM 'awaiting_children' AS unlink,
            r.awaits IS NOT NULL AND $4::text IS NULL AS repark,
            r.awaits IS NOT NULL AND $4::text IS NULL AND EXISTS (
              SELECT 1 FROM {schema}.gen_durable_signals s
               WHERE s.target_id = r.id AND s.consumed_at IS NULL AND s.name = ANY (r.awaits)) AS early
       FROM target t JOIN locked r ON r.id = t.id LEFT JOIN locked p ON p.id = r.parent_id
   ), retried AS (
     UPDATE {schema}.gen_durable g
        SET status = (CASE WHEN v.repark AND NOT v.early THEN 'awaiting_signal' ELSE 'runnable' END)::{schema}.gen_durable_status,
            step = COALESCE($4::text, g.step), state = COALESCE($5::text::jsonb, g.state),
            attempt = 0, reaps = 0, eligible_at = COALESCE($6::timestamptz, now()),
            awaits = CASE WHEN v.repark THEN g.awaits END,
            await_deadline = CASE WHEN v.repark AND NOT v.early AND g.await_deadline IS NOT NULL
                                  THEN COALESCE($6::timestamptz, now()) + GREATEST(g.await_deadline - g.eligible_at, interval '0') END,
            result = NULL,
            cancel_requested_at = NULL, cancel_reason = NULL, held_at = NULL, held_reason = NULL,
            deadline_at = CASE WHEN g.deadline_at > now() THEN g.deadline_at END,
            locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, started_seq = NULL,
            parent_id = CASE WHEN v.unlink THEN NULL ELSE g.parent_id END,
            updated_at = now()
       FROM verdict v
      WHERE g.id = v.id AND v.verdict = 'retried'
     RETURNING g.id, g.queue, g.parent_id, g.status = 'runnable' AND g.eligible_at <= now() AS due,
               g.status = 'awaiting_signal' AS parked, g.status::text AS outcome,
               (extract(epoch FROM g.await_deadline - now()) * 1000)::float8 AS deadline_in_ms, g.step, v.record,
               v.old_step, v.old_attempt, CASE WHEN v.record = 2 THEN g.state END AS new_state
   ), joined AS (
     UPDATE {schema}.gen_durable p
        SET children_pending = p.children_pending + j.n, updated_at = now()
       FROM (SELECT parent_id, count(*)::int AS n FROM retried WHERE parent_id IS NOT NULL GROUP BY parent_id) j
      WHERE p.id = j.parent_id AND p.status = 'awaiting_children'
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, next_step, attempt, outcome, state, actor)
     SELECT r.id, 'manual.retry', r.old_step, r.step, r.old_attempt, r.outcome, r.new_state, $8::text
       FROM retried r
      WHERE r.record > 0
   )
   SELECT v.id, v.verdict, v.status, v.parent_status, r.queue, r.due, r.parked, r.deadline_in_ms
     FROM verdict v LEFT JOIN retried r ON r.id = v.id`,
  {
    params: (i: RetryRequest) => [
      i.rows.map((r) => r.id),
      i.rows.map((r) => r.claimSeq),
      i.rows.map((r) => r.record),
      i.step,
      i.stateText,
      i.at,
      i.detach,
      i.actor,
    ],
    decode: (rows: readonly RetryRecord[]): RetriedRow[] =>
      rows.map((r): RetriedRow => {
        switch (r.verdict) {
          case 'retried':
            return {
              id: r.id,
              verdict: 'retried',
              queue: r.queue ?? '',
              due: r.due ?? false,
              parked: r.parked ?? false,
              deadlineInMs: r.deadline_in_ms,
            };
          case 'status':
            return { id: r.id, verdict: 'status', status: r.status };
          case 'parent':
            return { id: r.id, verdict: 'parent', parentStatus: r.parent_status };
        }
      }),
  },
);
