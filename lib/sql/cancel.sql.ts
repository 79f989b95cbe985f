import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** What happens to the live children of a cancelled row (the public `CancelChildren`). */
export type CancelChildren = 'cascade' | 'detach' | 'keep';

/** What CANCEL_INSTANCES is asked to do. */
export interface CancelRequest {
  /** The target by id, or null to address it by `correlationKey`. */
  readonly targetId: string | null;
  readonly correlationKey: string | null;
  readonly reason: string | null;
  readonly children: CancelChildren;
  /** `fence`: an executing row is cancelled at once and its claim fenced. */
  readonly fence: boolean;
  /**
   * A later round of a cascade (docs/design.md §27.2): the target was handled by an earlier
   * round; only its live descendants are looked at.
   */
  readonly descendantsOnly: boolean;
  /** Only a target of one of these FSMs (a `cancelOn` delivery); null = any. */
  readonly onlyFsms: readonly string[] | null;
  /** Who asked: the `actor` of the history rows (docs/design.md §28.1). */
  readonly actor?: string | null;
  /** FSM names whose history is `'off'` (no row) and `'full'` (a row with the state). */
  readonly historyOff?: readonly string[];
  readonly historyFull?: readonly string[];
}

/**
 * What happened to one row: `cancelled` (flipped now), `requested` (executing: the owner's
 * flush, or the reaper, ends it), `terminal` (the target, already ended: nothing changed),
 * `none` (a descendant already ended, or the target of a later round), `woken` (the target's
 * parent, whose join the cancel completed: runnable now).
 */
export type CancelAction = 'cancelled' | 'requested' | 'terminal' | 'none' | 'woken';

interface CancelRecord {
  id: string;
  action: CancelAction;
  is_target: boolean;
  queue: string;
  prior: DurableStatus;
  moved: boolean;
  signaled: boolean;
  concurrency_key: string | null;
  concurrency_shard: number | null;
}

/** One row CANCEL_INSTANCES looked at. */
export interface CancelledRow {
  readonly id: string;
  readonly action: CancelAction;
  readonly isTarget: boolean;
  readonly queue: string;
  /** The status the row had under the statement's lock, before it changed. */
  readonly prior: DurableStatus;
  /**
   * The row changed between the statement's snapshot and its lock (a concurrent commit, such
   * as a fan-out that inserted children the snapshot cannot see): a cascade runs another
   * round.
   */
  readonly moved: boolean;
  /** The row was ever sent a signal (its locked version). */
  readonly signaled: boolean;
  /** An executing row cancelled under `fence`: the key and shard it held (its gate slot). */
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
}

/**
 * Cancel, one statement with its riders (docs/design.md §27.2). `$1` target id or NULL, `$2`
 * correlation key or NULL (the key's occupant, index gen_durable_correlation), `$3` reason,
 * `$4` children mode, `$5` fence, `$6` descendants only, `$7` the FSMs the target must be one
 * of (a `cancelOn` delivery; NULL = any).
 * - `tree`: the target, and with `cascade` every descendant (recursive over parent_id, index
 *   gen_durable_parent; through ended rows too, whose children a `keep` may have left live).
 * - `locked`: the tree, the target's parent and (with `detach`) the target's live children,
 *   locked in id order, waiting (no SKIP LOCKED): a flush, a delivery or a spawn in flight on
 *   any of them commits first and is seen after the lock. `moved` compares each tree row's
 *   locked version with the snapshot's: a spawn that committed in between inserted children
 *   this statement cannot see, so the caller runs another round (`$6`) until nothing moved.
 * - per tree row, on its locked version: ended ⇒ nothing (the target reports `terminal`);
 *   executing without `fence` ⇒ the request is stored (`cancel_requested_at`, reason; the
 *   first request's reason wins) and the owner ends it; anything else ⇒ `cancelled` now,
 *   await deadline, claim, lease and shard cleared, and an executing row's `claim_seq`
 *   bumped, so its late outcome is stale (§26.1). A row leaving `executing` frees its K = 1
 *   key with it (gen_durable_concurrency_active); the caller credits a fenced gate slot.
 * - riders: the inbox of every row cancelled now is marked consumed (gen_durable_signals_inbox); the
 *   target's parent (outside the tree) is decremented once when the target was cancelled now
 *   and, awaiting children and at zero, becomes runnable (as JOIN_PARENTS); `detach` sets the
 *   live children's parent_id to NULL. Descendants' parents are in the tree: nothing to join.
 * NOTE: the inbox sweep reads the statement's snapshot. A delivery that committed while this
 * statement waited for the row's lock stored a signal the sweep cannot see; such a row is
 * `moved` and `signaled`, and the caller sweeps its inbox again in a new statement
 * (CONSUME_INBOXES). A delivery after the lock finds the row ended and stores nothing.
 * A target that is not found returns no row. Nothing is written for an ended target.
 * - history (docs/design.md §28.1): every tree row cancelled or requested now gets a
 *   `manual.cancel` row (outcome `cancelled` or `requested`, actor `$10`) unless its FSM is in
 *   `$8` (level `'off'`); with its state when in `$9` (`'full'`). An FSM this node does not
 *   know records at the default level.
 */
export const CANCEL_INSTANCES = sql(
  'cancel_instances',
  `WITH RECURSIVE target AS (
     SELECT id, parent_id FROM (
       SELECT id, parent_id, fsm FROM {schema}.gen_durable WHERE id = $1::bigint
       UNION ALL
       SELECT id, parent_id, fsm FROM {schema}.gen_durable WHERE $1::bigint IS NULL AND correlation_guard = $2::text
       LIMIT 1) t
      WHERE $7::text[] IS NULL OR t.fsm = ANY ($7::text[])
   ), tree AS (
     SELECT g.id, g.xmin::text AS seen FROM {schema}.gen_durable g JOIN target ON g.id = target.id
     UNION
     SELECT c.id, c.xmin::text FROM {schema}.gen_durable c JOIN tree ON c.parent_id = tree.id
      WHERE $4::text = 'cascade'
   ), want AS (
     SELECT id, 'tree' AS role, seen FROM tree
     UNION ALL
     SELECT parent_id, 'parent', NULL FROM target WHERE parent_id IS NOT NULL AND NOT $6::boolean
     UNION ALL
     SELECT c.id, 'detach', NULL FROM {schema}.gen_durable c JOIN target ON c.parent_id = target.id
      WHERE $4::text = 'detach' AND NOT $6::boolean
        AND c.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
   ), locked AS (
     SELECT g.id, g.status, g.queue, g.signaled, g.concurrency_key, g.concurrency_shard,
            g.fsm, g.step, g.attempt, w.role, COALESCE(g.id = (SELECT id FROM target), false) AS is_target,
            w.seen IS NOT NULL AND w.seen <> g.xmin::text AS moved
       FROM {schema}.gen_durable g JOIN want w ON g.id = w.id
      ORDER BY g.id
        FOR NO KEY UPDATE OF g
   ), live_target AS (
     SELECT EXISTS (SELECT 1 FROM locked
                     WHERE is_target AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')) AS live
   ), act AS (
     SELECT l.*,
            CASE WHEN l.role <> 'tree' THEN 'none'
                 WHEN l.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
                   THEN CASE WHEN l.is_target AND NOT $6::boolean THEN 'terminal' ELSE 'none' END
                 WHEN l.is_target AND $6::boolean THEN 'none'
                 WHEN NOT (lt.live OR $6::boolean) THEN 'none'
                 WHEN l.status = 'executing' AND NOT $5::boolean THEN 'requested'
                 ELSE 'cancelled' END AS action
       FROM locked l, live_target lt
   ), changed AS (
     UPDATE {schema}.gen_durable g
        SET status = CASE WHEN a.action = 'cancelled' THEN 'cancelled'::{schema}.gen_durable_status ELSE g.status END,
            cancel_requested_at = CASE WHEN a.role = 'tree' THEN COALESCE(g.cancel_requested_at, now())
                                       ELSE g.cancel_requested_at END,
            cancel_reason = CASE WHEN a.role = 'tree' THEN COALESCE(g.cancel_reason, $3::text) ELSE g.cancel_reason END,
            claim_seq = CASE WHEN a.action = 'cancelled' AND g.status = 'executing' THEN g.claim_seq + 1 ELSE g.claim_seq END,
            locked_by = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.locked_by END,
            lease_expires_at = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.lease_expires_at END,
            concurrency_shard = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.concurrency_shard END,
            await_deadline = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.await_deadline END,
            parent_id = CASE WHEN a.role = 'detach' THEN NULL ELSE g.parent_id END,
            updated_at = now()
       FROM act a
      WHERE g.id = a.id AND (a.action IN ('cancelled', 'requested') OR a.role = 'detach')
     RETURNING g.id
   ), inbox AS (
     UPDATE {schema}.gen_durable_signals s
        SET consumed_at = now()
       FROM act a
      WHERE a.action = 'cancelled' AND a.signaled AND s.target_id = a.id AND s.consumed_at IS NULL
   ), joined AS (
     UPDATE {schema}.gen_durable p
        SET children_pending = p.children_pending - 1,
            status = CASE WHEN p.status = 'awaiting_children' AND p.children_pending - 1 <= 0
                          THEN 'runnable'::{schema}.gen_durable_status ELSE p.status END,
            eligible_at = CASE WHEN p.status = 'awaiting_children' AND p.children_pending - 1 <= 0
                               THEN now() ELSE p.eligible_at END,
            updated_at = now()
       FROM act a
      WHERE p.id = a.id AND a.role = 'parent'
        AND EXISTS (SELECT 1 FROM act t WHERE t.is_target AND t.action = 'cancelled')
     RETURNING p.id, p.queue, p.status
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, attempt, outcome, state, actor)
     SELECT a.id, 'manual.cancel', a.step, a.attempt, a.action,
            CASE WHEN a.fsm = ANY ($9::text[]) THEN (SELECT g.state FROM {schema}.gen_durable g WHERE g.id = a.id) END,
            $10::text
       FROM act a
      WHERE a.role = 'tree' AND a.action IN ('cancelled', 'requested') AND NOT (a.fsm = ANY ($8::text[]))
   )
   SELECT a.id, a.action, a.is_target, a.queue, a.status AS prior, a.moved, a.signaled,
          a.concurrency_key, a.concurrency_shard
     FROM act a WHERE a.role = 'tree'
   UNION ALL
   SELECT j.id, 'woken', false, j.queue, 'awaiting_children', false, false, NULL, NULL
     FROM joined j WHERE j.status = 'runnable'`,
  {
    params: (i: CancelRequest) => [
      i.targetId,
      i.correlationKey,
      i.reason,
      i.children,
      i.fence,
      i.descendantsOnly,
      i.onlyFsms,
      i.historyOff ?? [],
      i.historyFull ?? [],
      i.actor ?? null,
    ],
    decode: (rows: readonly CancelRecord[]): CancelledRow[] => {
      const out: CancelledRow[] = [];
      for (const r of rows) {
        out.push({
          id: r.id,
          action: r.action,
          isTarget: r.is_target,
          queue: r.queue,
          prior: r.prior,
          moved: r.moved,
          signaled: r.signaled,
          concurrencyKey: r.concurrency_key,
          concurrencyShard: r.concurrency_shard,
        });
      }
      return out;
    },
  },
);
