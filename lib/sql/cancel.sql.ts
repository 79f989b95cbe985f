import type { DurableStatus } from '../gen-durable.constants';
import { parentJoinSet } from './parent-join';
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

interface CancelRecord extends CancelAnswerRecord {
  action: CancelAction;
  is_target: boolean;
  moved: boolean;
  signaled: boolean;
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

/** Where a cancel statement's parameters are: the reason, and the history levels and actor. */
interface CancelParams {
  readonly reason: string;
  readonly historyOff: string;
  readonly historyFull: string;
  readonly actor: string;
}

/**
 * The writes shared by the cancel statements (CANCEL_INSTANCES, CANCEL_BATCH), as CTEs over
 * their `act` rows (`id`, `action`, `role`, `signaled`, `fsm`, `step`, `attempt`), each row
 * written once:
 * - `changed`: a row `cancelled` now becomes cancelled, claim, lease and shard cleared (a
 *   parked row keeps its awaits and await deadline, so a retry parks it again, RETRY_INSTANCES;
 *   any other row's are cleared: a failed or cancelled row carries awaits only if it ended parked), an executing row's `claim_seq` bumped (its late outcome is stale, §26.1); a row
 *   `cancelled` or `requested` stores the request (`cancel_requested_at`, reason; the first
 *   request's reason wins); a `detach` row's parent_id is set NULL.
 * - `inbox`: the inbox of every row cancelled now is marked consumed (gen_durable_signals_inbox).
 * - `joined`: each parent in `joins` (`id`, `n`: its children cancelled now; never a row of
 *   `changed`) is decremented by `n` and, awaiting children and at zero, becomes runnable (as
 *   JOIN_PARENTS), by primary key.
 * - `recorded` (docs/design.md §28.1): every row cancelled or requested now gets a
 *   `manual.cancel` history row (outcome `cancelled` or `requested`, the actor) unless its FSM
 *   is in the `'off'` list; with its state when in the `'full'` list. An FSM this node does
 *   not know records at the default level.
 */
function cancelWrites(p: CancelParams, joins: string, releaseKey = false): string {
  // A replace (REPLACE_INSTANCE) frees the key of the occupant it cancels or asks to end.
  const release = releaseKey
    ? `correlation_scope = CASE WHEN a.is_target AND a.action IN ('cancelled', 'requested')
                                 THEN '{}'::{schema}.gen_durable_status[] ELSE g.correlation_scope END,`
    : '';
  return `changed AS (
     UPDATE {schema}.gen_durable g
        SET status = CASE WHEN a.action = 'cancelled' THEN 'cancelled'::{schema}.gen_durable_status ELSE g.status END,
            cancel_requested_at = CASE WHEN a.action IN ('cancelled', 'requested')
                                       THEN COALESCE(g.cancel_requested_at, now()) ELSE g.cancel_requested_at END,
            cancel_reason = CASE WHEN a.action IN ('cancelled', 'requested')
                                 THEN COALESCE(g.cancel_reason, ${p.reason}::text) ELSE g.cancel_reason END,
            claim_seq = CASE WHEN a.action = 'cancelled' AND g.status = 'executing' THEN g.claim_seq + 1 ELSE g.claim_seq END,
            locked_by = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.locked_by END,
            lease_expires_at = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.lease_expires_at END,
            concurrency_shard = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.concurrency_shard END,
            awaits = CASE WHEN a.action = 'cancelled' AND g.status <> 'awaiting_signal' THEN NULL ELSE g.awaits END,
            await_deadline = CASE WHEN a.action = 'cancelled' AND g.status <> 'awaiting_signal' THEN NULL ELSE g.await_deadline END,
            parent_id = CASE WHEN a.role = 'detach' THEN NULL ELSE g.parent_id END, ${release}
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
        SET ${parentJoinSet('j.n')}
       FROM (${joins}) j
      WHERE p.id = j.id
     RETURNING p.id, p.queue, p.status
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, attempt, outcome, state, actor)
     SELECT a.id, 'manual.cancel', a.step, a.attempt, a.action,
            CASE WHEN a.fsm = ANY (${p.historyFull}::text[])
                 THEN (SELECT g.state FROM {schema}.gen_durable g WHERE g.id = a.id) END,
            ${p.actor}::text
       FROM act a
      WHERE a.action IN ('cancelled', 'requested') AND NOT (a.fsm = ANY (${p.historyOff}::text[]))
   )`;
}

/** One row a cancel statement answered, as both decode it. */
interface CancelAnswerRecord {
  id: string;
  queue: string;
  prior: DurableStatus;
  concurrency_key: string | null;
  concurrency_shard: number | null;
}

function cancelAnswer(r: CancelAnswerRecord): {
  id: string;
  queue: string;
  prior: DurableStatus;
  concurrencyKey: string | null;
  concurrencyShard: number | null;
} {
  return {
    id: r.id,
    queue: r.queue,
    prior: r.prior,
    concurrencyKey: r.concurrency_key,
    concurrencyShard: r.concurrency_shard,
  };
}

/**
 * The CTEs of one CANCEL_INSTANCES round (`target` … `recorded`, parameters `$1`…`$10`), shared
 * with REPLACE_INSTANCE (lib/sql/replace.sql.ts), which also frees the target's key
 * (`releaseKey`, docs/identity.md "Conflict modes").
 */
export function cancelRoundCtes(releaseKey: boolean): string {
  return `target AS (
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
   ), ${cancelWrites(
     { reason: '$3', historyOff: '$8', historyFull: '$9', actor: '$10' },
     `SELECT a.id, 1 AS n FROM act a
       WHERE a.role = 'parent' AND EXISTS (SELECT 1 FROM act t WHERE t.is_target AND t.action = 'cancelled')`,
     releaseKey,
   )}`;
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
 *   executing without `fence` ⇒ `requested` (the owner ends it); anything else ⇒ `cancelled`
 *   now. A row leaving `executing` frees its K = 1 key with it (gen_durable_concurrency_active);
 *   the caller credits a fenced gate slot.
 * - the writes and riders of {@link cancelWrites} (the row flips, inbox, history, `detach`
 *   unlinking the live children); `joins`: the target's parent (outside the tree), decremented
 *   once when the target was cancelled now. Descendants' parents are in the tree: nothing to join.
 * NOTE: the inbox sweep reads the statement's snapshot. A delivery that committed while this
 * statement waited for the row's lock stored a signal the sweep cannot see; such a row is
 * `moved` and `signaled`, and the caller sweeps its inbox again in a new statement
 * (CONSUME_INBOXES). A delivery after the lock finds the row ended and stores nothing.
 * A target that is not found returns no row. Nothing is written for an ended target. History:
 * `$8` the FSMs at level `'off'`, `$9` at `'full'`, `$10` the actor.
 */
export const CANCEL_INSTANCES = sql(
  'cancel_instances',
  `WITH RECURSIVE ${cancelRoundCtes(false)}
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
    decode: (rows: readonly CancelRecord[]): CancelledRow[] =>
      rows.map((r) => ({
        ...cancelAnswer(r),
        action: r.action,
        isTarget: r.is_target,
        moved: r.moved,
        signaled: r.signaled,
      })),
  },
);

/** What a batch cancel did to one matched row (CANCEL_BATCH). */
export type CancelBatchAction =
  /** Cancelled now. */
  | 'cancelled'
  /** Executing: its owner (or the reaper) ends it. */
  | 'requested'
  /** Already ended: nothing changed. */
  | 'terminal'
  /** Has children: the caller cancels it alone (CANCEL_INSTANCES: its tree, cascade, rounds). */
  | 'single'
  /**
   * Changed under the statement, or a child of a `single` row of the batch: the caller cancels
   * it alone after the `single` rows (a cascade may have ended it by then).
   */
  | 'deferred';

/** One row CANCEL_BATCH answered for. */
export interface CancelBatchRow {
  readonly id: string;
  /** `woken`: a parent the batch's cancels completed the join of (runnable now), not a matched row. */
  readonly action: CancelBatchAction | 'woken';
  readonly queue: string;
  /** The status under the statement's lock, before it changed. */
  readonly prior: DurableStatus;
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
}

/** CANCEL_BATCH input: the matched ids of one batch (≤ 1 000) and the cancel options. */
export interface CancelBatchInput {
  readonly ids: readonly string[];
  readonly reason: string | null;
  readonly fence: boolean;
  /** FSMs whose history level is `'off'` (no `manual.cancel` row) and `'full'` (with state). */
  readonly historyOff: readonly string[];
  readonly historyFull: readonly string[];
  /** Who asked: the history rows' `actor`, or null. */
  readonly actor: string | null;
}

interface CancelBatchRecord extends CancelAnswerRecord {
  action: CancelBatchAction | 'woken';
}

/**
 * One batch of `cancelAll` (docs/design.md §27.7): CANCEL_INSTANCES' effects on many leaf
 * rows at once. `$1` the batch's ids (PK), `$2` reason, `$3` fence.
 * - `batch`: the rows in the statement's snapshot, with their version (`xmin`) and whether any
 *   row names them as parent (index gen_durable_parent). A row with children is answered
 *   `single`: its tree, cascade, detach and rounds are CANCEL_INSTANCES', which the caller runs
 *   for it alone.
 * - `locked`: the leaf rows and their parents, locked in id order, waiting (no SKIP LOCKED), as
 *   CANCEL_INSTANCES. A leaf whose locked version is not the snapshot's (a flush, a spawn, a
 *   delivery committed in between) is answered `deferred`, so nothing here acts on a row it
 *   did not see whole; so is a leaf whose parent is a `single` row of the batch, so a family
 *   matched together is cancelled from the top, as `cancel` of its root would (a cascade reaches
 *   the children; the parent is never woken by its children's cancels first).
 * - per leaf, on its locked version: ended ⇒ `terminal`, nothing written; executing without
 *   `$3` ⇒ `requested`; anything else ⇒ `cancelled` now.
 * - the writes and riders of {@link cancelWrites}, as CANCEL_INSTANCES writes them (history:
 *   `$4` the FSMs at level `'off'`, `$5` at `'full'`, `$6` the actor); `joins`: each parent
 *   decremented by the number of its children cancelled now (`woken` when that completed its
 *   join). A parent is never a leaf of the batch (it has children) nor cancelled by it, so each
 *   row is written once.
 * A matched id no longer in the table answers nothing.
 */
export const CANCEL_BATCH = sql(
  'cancel_batch',
  `WITH batch AS (
     SELECT g.id, g.parent_id, g.xmin::text AS seen,
            EXISTS (SELECT 1 FROM {schema}.gen_durable c WHERE c.parent_id = g.id) AS has_children
       FROM {schema}.gen_durable g WHERE g.id = ANY ($1::bigint[])
   ), want AS (
     SELECT id FROM batch WHERE NOT has_children
     UNION
     SELECT parent_id FROM batch WHERE NOT has_children AND parent_id IS NOT NULL
   ), locked AS (
     SELECT g.id, g.status, g.queue, g.parent_id, g.signaled, g.concurrency_key,
            g.concurrency_shard, g.xmin::text AS locked_seen, g.fsm, g.step, g.attempt
       FROM {schema}.gen_durable g WHERE g.id IN (SELECT id FROM want)
      ORDER BY g.id
        FOR NO KEY UPDATE OF g
   ), act AS (
     SELECT l.*, CASE WHEN b.id IS NULL THEN 'parent' ELSE 'tree' END AS role,
            CASE WHEN b.id IS NULL THEN 'none'
                 WHEN b.has_children THEN 'single'
                 WHEN b.seen <> l.locked_seen
                   OR EXISTS (SELECT 1 FROM batch p WHERE p.id = l.parent_id AND p.has_children) THEN 'deferred'
                 WHEN l.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
                   THEN 'terminal'
                 WHEN l.status = 'executing' AND NOT $3::boolean THEN 'requested'
                 ELSE 'cancelled' END AS action
       FROM locked l LEFT JOIN batch b ON b.id = l.id
   ), ${cancelWrites(
     { reason: '$2', historyOff: '$4', historyFull: '$5', actor: '$6' },
     `SELECT a.parent_id AS id, count(*)::int AS n FROM act a
       WHERE a.action = 'cancelled' AND a.parent_id IS NOT NULL
       GROUP BY a.parent_id`,
   )}
   SELECT a.id, a.action, a.queue, a.status AS prior, a.concurrency_key, a.concurrency_shard
     FROM act a WHERE a.role = 'tree'
   UNION ALL
   SELECT b.id, 'single', '', 'runnable', NULL, NULL
     FROM batch b WHERE b.has_children AND NOT EXISTS (SELECT 1 FROM act a WHERE a.id = b.id)
   UNION ALL
   SELECT j.id, 'woken', j.queue, 'awaiting_children', NULL, NULL
     FROM joined j WHERE j.status = 'runnable'`,
  {
    params: (i: CancelBatchInput) => [
      i.ids,
      i.reason,
      i.fence,
      i.historyOff,
      i.historyFull,
      i.actor,
    ],
    decode: (rows: readonly CancelBatchRecord[]): CancelBatchRow[] =>
      rows.map((r) => ({ ...cancelAnswer(r), action: r.action })),
  },
);
