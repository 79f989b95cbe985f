import type { DurableStatus } from '../gen-durable.constants';
import type { ResolvedFilter } from './resolved-filter';
import { filterParams, type ListDriver, listCandidates } from './query.sql';
import { sql } from './statement';

/** One row a bulk action addresses: what it needs to act on it without reading it again. */
export interface BulkRow {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly status: DurableStatus;
  readonly claimSeq: string;
}

/** One batch of a bulk action's rows, and where its scan stopped. */
export interface BulkBatch {
  /** The filter's hits, newest first, at most the batch size. */
  readonly rows: BulkRow[];
  /** Rows examined (at most the scan bound). */
  readonly scanned: number;
  /** The lowest id examined, or null when none was. */
  readonly lastScanned: string | null;
}

/** One batch request (BULK_BATCH input). */
export interface BulkBatchInput {
  readonly driver: ListDriver;
  /** Exclusive upper id bound, or null from the newest. */
  readonly after: string | null;
  /** Rows examined at most. */
  readonly scan: number;
  /** Hits returned at most (≤ 1 000). */
  readonly limit: number;
  readonly filter: ResolvedFilter;
}

interface BulkRecord {
  id: string | null;
  fsm: string;
  fsm_version: number;
  step: string;
  status: DurableStatus;
  claim_seq: string;
  scanned: number;
  last_scanned: string | null;
}

/**
 * The next batch of `cancelAll` / `retryAll` (docs/design.md §27.7): the same keyset walk as
 * LIST_INSTANCES — at most `$3` rows below id `$2` examined newest first through the `$1`
 * driver's index (the primary key, gen_durable_failed or gen_durable_parent; see
 * {@link listCandidates}), the first `$4` hits read by primary key — answering only what the
 * action needs of each hit (fsm, version, step, status, claim token). A call that crashed part way is
 * resumed by calling again: the walk re-selects by the filter, and rows already acted on are
 * either no longer hits or answered as unchanged.
 */
export const BULK_BATCH = sql(
  'bulk_batch',
  `WITH cand AS (
     ${listCandidates('$1', '$2', '$3', 5)}
   ), scanned AS (
     SELECT count(*)::int AS n, min(c.id)::text AS last FROM cand c
   ), batch AS (
     SELECT id, fsm, fsm_version, step, status, claim_seq FROM {schema}.gen_durable
      WHERE id = ANY (ARRAY(SELECT c.id FROM cand c WHERE c.hit ORDER BY c.id DESC LIMIT $4))
   )
   SELECT b.*, s.n AS scanned, s.last AS last_scanned
     FROM scanned s LEFT JOIN batch b ON true
    ORDER BY b.id DESC`,
  {
    params: (i: BulkBatchInput) => [i.driver, i.after, i.scan, i.limit, ...filterParams(i.filter)],
    decode: (rows: readonly BulkRecord[]): BulkBatch => {
      const out: BulkRow[] = [];
      for (const r of rows) {
        if (r.id === null) continue;
        out.push({
          id: r.id,
          fsm: r.fsm,
          fsmVersion: r.fsm_version,
          step: r.step,
          status: r.status,
          claimSeq: r.claim_seq,
        });
      }
      return {
        rows: out,
        scanned: rows[0]?.scanned ?? 0,
        lastScanned: rows[0]?.last_scanned ?? null,
      };
    },
  },
);

/** What a batch cancel did to one matched row (BULK_CANCEL). */
export type BulkCancelAction =
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

/** One row BULK_CANCEL answered for. */
export interface BulkCancelRow {
  readonly id: string;
  /** `woken`: a parent the batch's cancels completed the join of (runnable now), not a matched row. */
  readonly action: BulkCancelAction | 'woken';
  readonly queue: string;
  /** The status under the statement's lock, before it changed. */
  readonly prior: DurableStatus;
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
}

/** BULK_CANCEL input: the matched ids of one batch (≤ 1 000) and the cancel options. */
export interface BulkCancelInput {
  readonly ids: readonly string[];
  readonly reason: string | null;
  readonly fence: boolean;
  /** FSMs whose history level is `'off'` (no `manual.cancel` row) and `'full'` (with state). */
  readonly historyOff: readonly string[];
  readonly historyFull: readonly string[];
  /** Who asked: the history rows' `actor`, or null. */
  readonly actor: string | null;
}

interface BulkCancelRecord {
  id: string;
  action: BulkCancelAction | 'woken';
  queue: string;
  prior: DurableStatus;
  concurrency_key: string | null;
  concurrency_shard: number | null;
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
 *   `$3` ⇒ `requested` (the first request's reason wins); anything else ⇒ `cancelled` now,
 *   await deadline, claim, lease and shard cleared, an executing row's `claim_seq` bumped.
 * - riders: the inbox of every row cancelled now is consumed (signals_inbox); each parent is
 *   decremented by the number of its children cancelled now and, awaiting children and at zero,
 *   becomes runnable (`woken`). A parent is never a leaf of the batch (it has children), so each
 *   row is written once, by the one UPDATE.
 * - history (docs/design.md §28.1): each row cancelled or requested here gets a `manual.cancel`
 *   row (outcome `cancelled` / `requested`, actor `$6`) unless its FSM is in `$4` (level
 *   `'off'`), with its state when in `$5` (`'full'`), as CANCEL_INSTANCES writes them.
 * A matched id no longer in the table answers nothing.
 */
export const BULK_CANCEL = sql(
  'bulk_cancel',
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
     SELECT l.*, b.id IS NOT NULL AS matched,
            CASE WHEN b.id IS NULL THEN 'none'
                 WHEN b.has_children THEN 'single'
                 WHEN b.seen <> l.locked_seen
                   OR EXISTS (SELECT 1 FROM batch p WHERE p.id = l.parent_id AND p.has_children) THEN 'deferred'
                 WHEN l.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
                   THEN 'terminal'
                 WHEN l.status = 'executing' AND NOT $3::boolean THEN 'requested'
                 ELSE 'cancelled' END AS action
       FROM locked l LEFT JOIN batch b ON b.id = l.id
   ), joins AS (
     SELECT a.parent_id AS id, count(*)::int AS n FROM act a
      WHERE a.action = 'cancelled' AND a.parent_id IS NOT NULL
      GROUP BY a.parent_id
   ), changed AS (
     UPDATE {schema}.gen_durable g
        SET status = CASE WHEN a.action = 'cancelled' THEN 'cancelled'::{schema}.durable_status
                          WHEN j.n IS NOT NULL AND g.status = 'awaiting_children' AND g.children_pending - j.n <= 0
                            THEN 'runnable'::{schema}.durable_status
                          ELSE g.status END,
            cancel_requested_at = CASE WHEN a.action IN ('cancelled', 'requested')
                                       THEN COALESCE(g.cancel_requested_at, now()) ELSE g.cancel_requested_at END,
            cancel_reason = CASE WHEN a.action IN ('cancelled', 'requested')
                                 THEN COALESCE(g.cancel_reason, $2::text) ELSE g.cancel_reason END,
            claim_seq = CASE WHEN a.action = 'cancelled' AND g.status = 'executing' THEN g.claim_seq + 1 ELSE g.claim_seq END,
            locked_by = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.locked_by END,
            lease_expires_at = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.lease_expires_at END,
            concurrency_shard = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.concurrency_shard END,
            await_deadline = CASE WHEN a.action = 'cancelled' THEN NULL ELSE g.await_deadline END,
            children_pending = g.children_pending - COALESCE(j.n, 0),
            eligible_at = CASE WHEN j.n IS NOT NULL AND g.status = 'awaiting_children' AND g.children_pending - j.n <= 0
                               THEN now() ELSE g.eligible_at END,
            updated_at = now()
       FROM act a LEFT JOIN joins j ON j.id = a.id
      WHERE g.id = a.id AND (a.action IN ('cancelled', 'requested') OR j.n IS NOT NULL)
     RETURNING g.id, g.queue, g.status, j.n IS NOT NULL AS joined
   ), inbox AS (
     UPDATE {schema}.signals s
        SET consumed_at = now()
       FROM act a
      WHERE a.action = 'cancelled' AND a.signaled AND s.target_id = a.id AND s.consumed_at IS NULL
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, attempt, outcome, state, actor)
     SELECT a.id, 'manual.cancel', a.step, a.attempt, a.action,
            CASE WHEN a.fsm = ANY ($5::text[]) THEN (SELECT g.state FROM {schema}.gen_durable g WHERE g.id = a.id) END,
            $6::text
       FROM act a
      WHERE a.matched AND a.action IN ('cancelled', 'requested') AND NOT (a.fsm = ANY ($4::text[]))
   )
   SELECT a.id, a.action, a.queue, a.status AS prior, a.concurrency_key, a.concurrency_shard
     FROM act a WHERE a.matched
   UNION ALL
   SELECT b.id, 'single', '', 'runnable', NULL, NULL
     FROM batch b WHERE b.has_children AND NOT EXISTS (SELECT 1 FROM act a WHERE a.id = b.id)
   UNION ALL
   SELECT c.id, 'woken', c.queue, 'awaiting_children', NULL, NULL
     FROM changed c WHERE c.joined AND c.status = 'runnable'`,
  {
    params: (i: BulkCancelInput) => [
      i.ids,
      i.reason,
      i.fence,
      i.historyOff,
      i.historyFull,
      i.actor,
    ],
    decode: (rows: readonly BulkCancelRecord[]): BulkCancelRow[] =>
      rows.map((r) => ({
        id: r.id,
        action: r.action,
        queue: r.queue,
        prior: r.prior,
        concurrencyKey: r.concurrency_key,
        concurrencyShard: r.concurrency_shard,
      })),
  },
);
