import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** One live row past its instance deadline (DUE_INSTANCE_DEADLINES). */
export interface DueDeadline {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly status: DurableStatus;
  /** Its cancel was requested already (a cooperative deadline cancel, or an operator's). */
  readonly requested: boolean;
  /** How long past its deadline it is, ms (database clock). */
  readonly overdueMs: number;
  /**
   * Its deadline as the database's text (microseconds kept: a `Date` would drop them): with
   * `id`, the keyset cursor of the next page.
   */
  readonly deadlineKey: string;
}

interface DueDeadlineRecord {
  id: string;
  fsm: string;
  fsm_version: number;
  status: DurableStatus;
  requested: boolean;
  overdue_ms: number;
  deadline_key: string;
}

/** What DUE_INSTANCE_DEADLINES is asked: the FSMs, the page size, and where the page starts. */
export interface DueDeadlinesInput {
  readonly fsms: readonly string[];
  readonly limit: number;
  /** The last row of the previous page (`deadlineAt`, `id`), or absent for the first page. */
  readonly after?: { readonly deadlineKey: string; readonly id: string } | null;
}

/**
 * The instance-deadline sweep's scan (docs/operations-control.md "Instance deadlines"): live
 * rows of the FSMs `$1` (the ones this node knows: only it can tell an `onDeadline` step) whose
 * `deadline_at` has passed, most overdue first (then by id), at most `$2`, after the keyset
 * cursor (`$3` deadline as text, exact to the microsecond, `$4` id; NULL: from the start), so a sweep pages past rows it left
 * alone (executing within their grace) (index gen_durable_deadline, partial on live rows with
 * a deadline: the cursor is a range of it). Reads without locks: each row's action
 * (CANCEL_INSTANCES, ROUTE_DEADLINE) locks it and checks it again.
 */
export const DUE_INSTANCE_DEADLINES = sql(
  'due_instance_deadlines',
  `SELECT id, fsm, fsm_version, status, cancel_requested_at IS NOT NULL AS requested,
          GREATEST(0, EXTRACT(EPOCH FROM now() - deadline_at) * 1000)::float8 AS overdue_ms,
          deadline_at::text AS deadline_key
     FROM {schema}.gen_durable
    WHERE deadline_at IS NOT NULL AND deadline_at <= now()
      AND deadline_at >= COALESCE($3::timestamptz, '-infinity'::timestamptz)
      AND ($3::timestamptz IS NULL OR (deadline_at, id) > ($3::timestamptz, $4::bigint))
      AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
      AND fsm = ANY ($1::text[])
    ORDER BY deadline_at, id
    LIMIT $2`,
  {
    params: (i: DueDeadlinesInput) => [
      i.fsms,
      i.limit,
      i.after?.deadlineKey ?? null,
      i.after?.id ?? null,
    ],
    decode: (rows: readonly DueDeadlineRecord[]): DueDeadline[] =>
      rows.map((r) => ({
        id: r.id,
        fsm: r.fsm,
        fsmVersion: r.fsm_version,
        status: r.status,
        requested: r.requested,
        overdueMs: Number(r.overdue_ms),
        deadlineKey: r.deadline_key,
      })),
  },
);

/** What ROUTE_DEADLINE is asked. */
export interface RouteDeadlineInput {
  readonly id: string;
  /** The FSM's `onDeadline` step. */
  readonly step: string;
  /** The FSM's grace for an executing row, ms. */
  readonly graceMs: number;
  /** Whether its FSM's history records the move (level not `'off'`). */
  readonly record: boolean;
}

/** The row ROUTE_DEADLINE moved, as it was under the lock. */
export interface RoutedDeadline {
  readonly id: string;
  readonly queue: string;
  readonly prior: DurableStatus;
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
}

interface RoutedRecord {
  id: string;
  queue: string;
  prior: DurableStatus;
  concurrency_key: string | null;
  concurrency_shard: number | null;
}

/**
 * Moves row `$1`, past its deadline, to its FSM's `onDeadline` step `$2`
 * (docs/operations-control.md "Instance deadlines"), by primary key, in one statement:
 * - `locked`: the row, locked (waiting: a flush in flight commits first, and the lock re-checks
 *   the conditions on the committed version), only while it is live and past its deadline; an
 *   executing row only once `$3` ms of grace have passed too (before that its outcome may
 *   still commit; it is left for a later sweep).
 * - `moved`: runnable at once on step `$2`, attempt 0, deadline, awaits and await deadline
 *   cleared, rate limit and weight reset (a `next` without options); an executing row's claim
 *   is fenced (`claim_seq` + 1, lease and shard cleared: its late outcome is stale, §26.1). Its
 *   children and inbox are left as they are.
 * - `recorded` (`$4`): a `deadline` history row naming the step moved to.
 * No row when it ended, or is executing within its grace: nothing is written.
 */
export const ROUTE_DEADLINE = sql(
  'route_deadline',
  `WITH locked AS (
     SELECT g.id, g.queue, g.status, g.step, g.attempt, g.claim_seq, g.concurrency_key, g.concurrency_shard
       FROM {schema}.gen_durable g
      WHERE g.id = $1::bigint AND g.deadline_at <= now()
        AND (g.status IN ('runnable', 'awaiting_signal', 'awaiting_children')
             OR (g.status = 'executing'
                 AND g.deadline_at + make_interval(secs => $3::float8 / 1000) <= now()))
        FOR NO KEY UPDATE OF g
   ), moved AS (
     UPDATE {schema}.gen_durable g
        SET status = 'runnable', step = $2::text, attempt = 0, eligible_at = now(),
            deadline_at = NULL, awaits = NULL, await_deadline = NULL, rate_limit = NULL, weight = 1,
            claim_seq = CASE WHEN l.status = 'executing' THEN g.claim_seq + 1 ELSE g.claim_seq END,
            locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL,
            reaps = 0, suspect = false, updated_at = now()
       FROM locked l
      WHERE g.id = l.id
     RETURNING g.id
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, next_step, attempt, claim_seq, outcome)
     SELECT l.id, 'deadline', l.step, $2::text, l.attempt, l.claim_seq, 'runnable'
       FROM locked l WHERE $4::boolean
   )
   SELECT l.id, l.queue, l.status AS prior, l.concurrency_key, l.concurrency_shard
     FROM locked l JOIN moved m ON m.id = l.id`,
  {
    params: (i: RouteDeadlineInput) => [i.id, i.step, i.graceMs, i.record],
    decode: (rows: readonly RoutedRecord[]): RoutedDeadline | null => {
      const r = rows[0];
      return r
        ? {
            id: r.id,
            queue: r.queue,
            prior: r.prior,
            concurrencyKey: r.concurrency_key,
            concurrencyShard: r.concurrency_shard,
          }
        : null;
    },
  },
);
