import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** What RETRY_INSTANCE is asked to do (docs/design.md §27.3). */
export interface RetryRequest {
  readonly id: string;
  /** The row's `claim_seq` when it was read: a row changed since then is not touched. */
  readonly claimSeq: string;
  /** The step to resume at, or null to keep the row's. */
  readonly step: string | null;
  /** The new state as JSON text, or null to keep the row's. */
  readonly stateText: string | null;
  /** When it becomes due, or null for now (database clock). */
  readonly at: Date | null;
  /** Unlink it from a parent that no longer awaits its children instead of refusing. */
  readonly detach: boolean;
  /** Its history row (docs/design.md §28.1): 0 none (level `'off'`), 1 a row, 2 with the state. */
  readonly record?: 0 | 1 | 2;
  /** Who asked (the history row's `actor`), or null. */
  readonly actor?: string | null;
}

/**
 * What RETRY_INSTANCE answered: `retried`; `gone` (no such row: collected by GC meanwhile);
 * `status` (the row is not failed or cancelled, or changed since it was read: `status` names
 * it); `parent` (its parent no longer awaits children: `parentStatus` names what it is).
 */
export type RetryVerdict =
  | {
      readonly verdict: 'retried';
      readonly queue: string;
      readonly due: boolean;
      readonly parentJoined: boolean;
    }
  | { readonly verdict: 'gone' }
  | { readonly verdict: 'status'; readonly status: DurableStatus }
  | { readonly verdict: 'parent'; readonly parentStatus: DurableStatus | null };

interface RetryRecord {
  verdict: 'retried' | 'status' | 'parent';
  status: DurableStatus;
  parent_status: DurableStatus | null;
  queue: string | null;
  due: boolean | null;
  joined: boolean | null;
}

/**
 * Manual retry, one statement (docs/design.md §27.3): a `failed` or `cancelled` row whose
 * `claim_seq` is still `$2` becomes runnable at step `$3` (NULL: its own) with state `$4`
 * (NULL: its own), due at `$5` (NULL: now), `attempt` and `reaps` reset, the cancel request
 * and the claim cleared; `last_error` is kept. The row and its parent are locked in id order
 * (PK lookups). A parent still awaiting children has its barrier re-incremented in the same
 * statement; a parent that moved on refuses the retry unless `$6` (detach), which sets
 * parent_id NULL. A re-occupied correlation key raises the unique violation of
 * gen_durable_correlation (the caller's `DuplicateError`); nothing is written then. A retry
 * racing GC's delete either runs first (GC_DELETE re-checks terminality and skips the row) or
 * finds no row (`gone`). A retry that happens writes its history row (kind `manual.retry`, the
 * `$7` actor; with the state when `$8` = 2) in the same statement, unless `$8` = 0 (level
 * `'off'`).
 */
export const RETRY_INSTANCE = sql(
  'retry_instance',
  `WITH target AS (
     SELECT id, parent_id FROM {schema}.gen_durable WHERE id = $1::bigint
   ), locked AS (
     SELECT g.id, g.status, g.claim_seq, g.parent_id, g.step, g.attempt
       FROM {schema}.gen_durable g
      WHERE g.id = ANY (ARRAY[(SELECT id FROM target), (SELECT parent_id FROM target)])
      ORDER BY g.id
        FOR NO KEY UPDATE OF g
   ), verdict AS (
     SELECT r.id, r.status, p.status AS parent_status, r.step AS old_step, r.attempt AS old_attempt,
            CASE WHEN r.status NOT IN ('failed', 'cancelled') OR r.claim_seq <> $2::bigint THEN 'status'
                 WHEN r.parent_id IS NOT NULL AND p.status IS DISTINCT FROM 'awaiting_children' AND NOT $6::boolean
                   THEN 'parent'
                 ELSE 'retried' END AS verdict,
            r.parent_id IS NOT NULL AND p.status IS DISTINCT FROM 'awaiting_children' AS unlink
       FROM locked r LEFT JOIN locked p ON p.id = r.parent_id
      WHERE r.id = (SELECT id FROM target)
   ), retried AS (
     UPDATE {schema}.gen_durable g
        SET status = 'runnable', step = COALESCE($3::text, g.step), state = COALESCE($4::text::jsonb, g.state),
            attempt = 0, reaps = 0, eligible_at = COALESCE($5::timestamptz, now()),
            awaits = NULL, await_deadline = NULL, result = NULL,
            cancel_requested_at = NULL, cancel_reason = NULL,
            locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, started_seq = NULL,
            parent_id = CASE WHEN v.unlink THEN NULL ELSE g.parent_id END,
            updated_at = now()
       FROM verdict v
      WHERE g.id = v.id AND v.verdict = 'retried'
     RETURNING g.id, g.queue, g.parent_id, g.eligible_at <= now() AS due, g.step, v.old_step, v.old_attempt,
               CASE WHEN $8::int = 2 THEN g.state END AS new_state
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, next_step, attempt, outcome, state, actor)
     SELECT r.id, 'manual.retry', r.old_step, r.step, r.old_attempt, 'runnable', r.new_state, $7::text
       FROM retried r
      WHERE $8::int > 0
   ), joined AS (
     UPDATE {schema}.gen_durable p
        SET children_pending = p.children_pending + 1, updated_at = now()
       FROM retried r
      WHERE p.id = r.parent_id AND p.status = 'awaiting_children'
     RETURNING p.id
   )
   SELECT v.verdict, v.status, v.parent_status, r.queue, r.due,
          EXISTS (SELECT 1 FROM joined) AS joined
     FROM verdict v LEFT JOIN retried r ON r.id = v.id`,
  {
    params: (i: RetryRequest) => [
      i.id,
      i.claimSeq,
      i.step,
      i.stateText,
      i.at,
      i.detach,
      i.actor ?? null,
      i.record ?? 1,
    ],
    decode: (rows: readonly RetryRecord[]): RetryVerdict => {
      const r = rows[0];
      if (!r) return { verdict: 'gone' };
      switch (r.verdict) {
        case 'retried':
          return {
            verdict: 'retried',
            queue: r.queue ?? '',
            due: r.due ?? false,
            parentJoined: r.joined ?? false,
          };
        case 'status':
          return { verdict: 'status', status: r.status };
        case 'parent':
          return { verdict: 'parent', parentStatus: r.parent_status };
      }
    },
  },
);
