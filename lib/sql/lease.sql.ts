import type { DurableStatus } from '../gen-durable.constants';
import { type ClaimHead, headBefore } from './claim.sql';
import { heldClaim } from './held-claim';
import { type IdQueue, idsOf, noRows } from './row-decoders';
import { sql } from './statement';

/** A claim this worker holds: the row id and the claim's fencing token. */
export interface HeldClaim {
  readonly id: string;
  readonly claimSeq: string;
}

/** One answer row of REAP_EXPIRED: the sweep's own columns, and a reaped row's (id null: none). */
type ReapRecord = {
  db_now: number;
  seen: number;
  left_at: number | null;
} & (
  | {
      id: string;
      status: DurableStatus;
      parent_id: string | null;
      queue: string;
      fsm: string;
      step: string;
      reaps: number;
      suspected: boolean;
    }
  | { id: null }
);

/** A row REAP_EXPIRED took back: runnable again, or failed as a poison pill. */
export interface ReapedRow {
  readonly id: string;
  readonly status: DurableStatus;
  readonly parentId: string | null;
  readonly queue: string;
  readonly fsm: string;
  readonly step: string;
  /** Reaps counted so far, this one included. */
  readonly reaps: number;
  /**
   * This reap took the row to the cap: it is now a suspect, to be run alone before any verdict
   * (docs/design.md §26.5).
   */
  readonly suspected: boolean;
}

/** What one REAP_EXPIRED sweep did, and what the reaper's floor learns from it. */
export interface ReapSweep {
  /** The rows it took back. */
  readonly rows: ReapedRow[];
  /** The statement's `now()`: the upper end of the range it scanned. */
  readonly dbNow: Date;
  /** Expired rows it locked (at most its limit): the limit reached means more may be in range. */
  readonly seen: number;
  /** The earliest lease of a row it locked but left (its parent busy), if any. */
  readonly left: Date | undefined;
}

interface HeartbeatRecord {
  id: string;
  seq: string | null;
  renewed: boolean;
  cancel_requested: boolean;
  cancel_reason: string | null;
}

/** A renewed claim whose instance's cancel was requested (docs/design.md §27.2). */
export interface CancelledClaim extends HeldClaim {
  readonly reason: string | null;
}

/** What a heartbeat found: the claims it renewed, and those no longer this worker's. */
export interface HeartbeatResult {
  readonly renewed: string[];
  /**
   * Claims the row no longer carries (re-claimed, reaped, fenced, ended or gone), read from
   * the statement's snapshot: a row locked by someone else at that moment is in neither list.
   */
  readonly lost: HeldClaim[];
  /** Renewed claims whose cancel was requested: their steps' `ctx.signal` aborts. */
  readonly cancelRequested: CancelledClaim[];
}

/**
 * Heartbeat (docs/design.md §17.1, §27.5): extend the lease of the rows this scheduler holds,
 * `$2`/`$3` = (id, claim_seq) pairs, guarded by worker and fencing token; rows locked by
 * someone else are skipped, never waited on. It also names the claims that are lost: a row
 * whose committed version no longer carries this worker, `executing` and the claim's token,
 * so the owner can abort the running step's `ctx.signal`. A claim's token only grows, so a
 * claim seen lost stays lost. A renewed row whose cancel was requested comes back flagged,
 * with its reason (read under the row lock): the owner aborts its step's `ctx.signal`
 * (docs/design.md §27.2). `$5` carries each held claim's pending `ctx.progress` value as JSON
 * text, or NULL (docs/design.md §28.2): a renewed row with one stores it as `progress`
 * `{ step, value }` (the step it was reported by, so only a later run of that step sees it as
 * `lastProgress`) with `progress_at`; the statement count of a heartbeat is unchanged, and a
 * row without a pending value is written as before. PK lookups, pinned by `g.id = ANY ($2)` (not
 * gen_durable_lease: under a pinned horizon it holds a dead entry per claim since the pin).
 * `$1` is the worker once per row, a column of the entries like in the flush: as a constant
 * its `locked_by = $1` made the planner expect a single held row (see heldClaim). The lost
 * claims are the entries whose row, read by the same primary-key scan, fails the guard or is
 * gone (a hash left join, linear in the batch; test/engine/batch-write-plans.spec.ts).
 */
export const HEARTBEAT = sql(
  'heartbeat',
  `WITH t AS (
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $5::text[]) AS t(worker, id, seq, progress)
   ), h AS (
     SELECT g.id, t.progress FROM {schema}.gen_durable g
       JOIN t ON g.id = t.id
      WHERE g.id = ANY ($2::bigint[]) AND ${heldClaim('g', 't.worker', 't.seq')}
      ORDER BY g.id
      FOR NO KEY UPDATE OF g SKIP LOCKED
   ), renewed AS (
     UPDATE {schema}.gen_durable g
        SET lease_expires_at = now() + make_interval(secs => $4::float8 / 1000),
            progress = CASE WHEN h.progress IS NULL THEN g.progress
                            ELSE jsonb_build_object('step', g.step, 'value', h.progress::jsonb) END,
            progress_at = CASE WHEN h.progress IS NULL THEN g.progress_at ELSE now() END
       FROM h WHERE g.id = h.id
     RETURNING g.id, g.claim_seq, g.cancel_requested_at IS NOT NULL AS cancel_requested, g.cancel_reason
   )
   SELECT id, claim_seq AS seq, true AS renewed, cancel_requested, cancel_reason FROM renewed
   UNION ALL
   SELECT t.id, t.seq, false, false, NULL
     FROM t LEFT JOIN (SELECT g.id, g.locked_by, g.status, g.claim_seq FROM {schema}.gen_durable g
                        WHERE g.id = ANY ($2::bigint[])) c ON c.id = t.id
    WHERE (c.id IS NOT NULL AND ${heldClaim('c', 't.worker', 't.seq')}) IS NOT TRUE`,
  {
    params: (i: {
      readonly worker: string;
      readonly rows: readonly HeldClaim[];
      readonly leaseMs: number;
      /** Pending progress JSON text per row of `rows` (same order), null for none; absent = none. */
      readonly progress?: readonly (string | null)[];
    }) => {
      const workers: string[] = [];
      const ids: string[] = [];
      const seqs: string[] = [];
      const progress: (string | null)[] = [];
      for (let k = 0; k < i.rows.length; k++) {
        const r = i.rows[k]!;
        workers.push(i.worker);
        ids.push(r.id);
        seqs.push(r.claimSeq);
        progress.push(i.progress?.[k] ?? null);
      }
      return [workers, ids, seqs, i.leaseMs, progress];
    },
    decode: (rows: readonly HeartbeatRecord[]): HeartbeatResult => {
      const renewed: string[] = [];
      const lost: HeldClaim[] = [];
      const cancelRequested: CancelledClaim[] = [];
      for (const r of rows) {
        if (r.renewed) {
          renewed.push(r.id);
          if (r.cancel_requested) {
            cancelRequested.push({ id: r.id, claimSeq: r.seq as string, reason: r.cancel_reason });
          }
        } else lost.push({ id: r.id, claimSeq: r.seq as string });
      }
      return { renewed, lost, cancelRequested };
    },
  },
);

/** `$1` id, `$2` worker, `$3` claim token of one held claim (MARK/CLEAR_STEP_STARTED). */
function heldClaimParams(i: { readonly worker: string; readonly row: HeldClaim }): unknown[] {
  return [i.row.id, i.worker, i.row.claimSeq];
}

/**
 * The start of a step of a row that has already lost a worker (`reaps` > 0), recorded before
 * the step runs: `started_seq` = the claim's fencing token, guarded by worker, status and
 * token (a row reaped meanwhile is left alone). A loss while the mark stands is a loss while
 * the row's own step ran, the only kind REAP_EXPIRED and RECLAIM_PREDECESSOR count toward the
 * poison-pill cap beyond a row's first (docs/reliability.md, finding F-R11); CLEAR_STEP_STARTED
 * takes it off when the step returns. PK lookup. Rows that never lost a worker never run it,
 * so the hot path's statement count is unchanged.
 */
export const MARK_STEP_STARTED = sql(
  'mark_step_started',
  `UPDATE {schema}.gen_durable g
      SET started_seq = g.claim_seq
    WHERE g.id = $1::bigint AND ${heldClaim('g', '$2', '$3::bigint')}`,
  { params: heldClaimParams, decode: noRows },
);

/**
 * The step of a row that has already lost a worker returned (its outcome goes to the flusher):
 * the MARK_STEP_STARTED mark is cleared, guarded like it, so a loss while the outcome waits for
 * its flush (a slow or retried commit, a worker killed by another row) does not count toward
 * the poison-pill cap (docs/reliability.md, finding F-R11). A flush that committed first left
 * the row unlocked: nothing matches. PK lookup. Only rows with `reaps` > 0 run it.
 */
export const CLEAR_STEP_STARTED = sql(
  'clear_step_started',
  `UPDATE {schema}.gen_durable g
      SET started_seq = NULL
    WHERE g.id = $1::bigint AND ${heldClaim('g', '$2', '$3::bigint')}`,
  { params: heldClaimParams, decode: noRows },
);

/** What RELEASE_CLAIMS released: the ids, and the earliest place among them in the pick order. */
export interface ReleasedClaims {
  readonly ids: string[];
  /**
   * The first released row's place in the pick index's `(priority, eligible_at)` order, its
   * `eligible_at` capped at `now()` (the queue's claim floor goes back to it, docs/design.md
   * §5.3.1), or undefined when none was released.
   */
  readonly earliest: ClaimHead | undefined;
}

/**
 * Releases held claims back to runnable (shutdown drain, admission denial; docs/design.md §5.4, §17.4):
 * guarded, attempt and eligible_at kept, lock, lease and shard cleared. A row whose cancel was
 * requested is not released (a runnable row must not carry a request): it stays executing
 * until its lease expires and the reaper cancels it (docs/design.md §27.2). PK lookups, pinned by
 * `g.id = ANY ($2)` (not gen_durable_lease, as HEARTBEAT). Answers each released row's place in
 * the pick order, so the picker puts its queue's claim floor back to the earliest of them.
 *
 * The rows are locked first, in id order, as every other multi-row writer locks them (§6.3
 * step 0): a released row may meanwhile be another worker's (a worker paused past its lease
 * releases rows re-claimed since), whose flush holds it and its other rows in id order, and an
 * UPDATE that took the rows in its plan's order could hold one of them while waiting for
 * another (finding F-R13 in docs/reliability.md; test/engine/lock-order.spec.ts). The cancel
 * request is read under that lock (`releasable`), and the UPDATE is driven by the locked rows,
 * one primary-key probe each: with a restriction of its own on `g` the planner expected a
 * single row there and rescanned the locked rows for every one of them, quadratic in the batch
 * (test/engine/batch-write-plans.spec.ts; test/engine/pinned-horizon-writes.spec.ts). `$1` is
 * the worker once per row, as in HEARTBEAT.
 */
export const RELEASE_CLAIMS = sql(
  'release_claims',
  `WITH t AS (
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS t(worker, id, seq)
   ), locked AS (
     SELECT g.id, g.cancel_requested_at IS NULL AS releasable FROM {schema}.gen_durable g
       JOIN t ON g.id = t.id
      WHERE g.id = ANY ($2::bigint[]) AND ${heldClaim('g', 't.worker', 't.seq')}
      ORDER BY g.id
      FOR NO KEY UPDATE OF g
   )
   UPDATE {schema}.gen_durable g
      SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL,
          updated_at = now()
     FROM locked l
    WHERE g.id = l.id AND l.releasable
    RETURNING g.id, g.priority, (extract(epoch FROM LEAST(g.eligible_at, now())) * 1000)::float8 AS at`,
  {
    params: (i: { readonly worker: string; readonly rows: readonly HeldClaim[] }) => {
      const workers: string[] = [];
      const ids: string[] = [];
      const seqs: string[] = [];
      for (const r of i.rows) {
        workers.push(i.worker);
        ids.push(r.id);
        seqs.push(r.claimSeq);
      }
      return [workers, ids, seqs];
    },
    decode: (rows: readonly { id: string; priority: number; at: number }[]): ReleasedClaims => {
      const ids: string[] = [];
      let earliest: ClaimHead | undefined;
      for (const r of rows) {
        ids.push(r.id);
        const place = { priority: r.priority, at: new Date(r.at) };
        if (earliest === undefined || headBefore(place, earliest)) earliest = place;
      }
      return { ids, earliest };
    },
  },
);

/**
 * Reaper (docs/design.md §17.2, §26.5): expired leases (index gen_durable_lease) back to runnable with
 * attempt + 1, claimed in id order, skip-locked (a parent locked mid-spawn is skipped). `$1` =
 * the poison-pill cap, `$2` = batch.
 * The scan of gen_durable_lease starts at `$6`, the reaper's floor (lib/runtime/sweep-floor.ts;
 * `'-infinity'` for a full sweep), always an index condition so the planner starts the index
 * there: under a pinned xmin horizon the index holds a dead entry per claim and heartbeat since
 * the pin, all with leases in the past, which a scan from the low end visits one by one. The
 * answer carries the sweep's own columns on every row, or on one row with a NULL id when
 * nothing was reaped (`sweep` LEFT JOIN `reaped`): `db_now` (the statement's `now()`), `seen`
 * (expired rows locked: `$2` of them means more may wait) and `left_at` (the earliest lease of a
 * locked row left behind because its parent was busy), from which the floor of the next sweep
 * follows.
 * Only losses that can be the row's own count (finding F-R11): its first, and any later one
 * whose step was running under the lost claim (`started_seq = claim_seq`: MARK_STEP_STARTED,
 * not yet cleared by CLEAR_STEP_STARTED). A row lost while buffered, prefetched, queued behind
 * other rows or waiting for its flush goes back without a count.
 * The counted loss that reaches `$1` does not fail the row: it becomes a `suspect` (runnable),
 * which the node that claims it next runs alone (lib/runtime/solo-run.ts), since a worker lost
 * to a pause, a stall or another row's kill while the step ran is no proof. Only a counted loss
 * of a suspect, i.e. during its solo run, fails it as a poison pill, naming its step and count.
 * A suspect lost before its solo step started goes back uncounted, still a suspect.
 * A row reaped *again* (reaps ≥ 1 before this reap) becomes eligible at a random point within
 * reaps × `$3` ms (the lease TTL) instead of keeping its place: rows that died together with a
 * poison pill were otherwise re-claimed with it, batch after batch (docs/reliability.md,
 * finding F-R2). A first reap keeps eligible_at (recovery from an ordinary crash stays within
 * lease + reaper interval + poll).
 * A row whose cancel was requested (docs/design.md §27.2) is not requeued: its step never
 * returned, so its lease ends it `cancelled` (attempt, reaps, suspicion and error unchanged);
 * the reaper gives it a terminal's riders as it does a poison pill. A row that ends here
 * (cancelled or poisoned) drops its awaits: it was running, not parked, so a retry does not
 * park it again (RETRY_INSTANCES).
 * History (docs/design.md §28.1), in the same statement: every row taken back gets a row —
 * `reaped` (runnable again), `poisoned` (failed, its error the verdict) or `cancelled` — with the
 * lost worker, claim and attempt, unless its FSM is in `$4` (level `'off'`); with its state
 * when in `$5` (`'full'`). An FSM this node does not know records at the default level.
 * The reaper never waits for a lock: a row that ends here with a parent takes its parent's lock
 * skip-locked too (`parents`, gen_durable_pkey) and is left for the next sweep when the parent
 * is busy, since JOIN_PARENTS follows in the same transaction and a cancel of that child holds
 * the parent while it waits for the child (docs/design.md §6.3, lock order).
 */
export const REAP_EXPIRED = sql(
  'reap_expired',
  `WITH expired AS (
     SELECT id, reaps = 0 OR started_seq IS NOT DISTINCT FROM claim_seq AS counts, suspect, reaps,
            locked_by, attempt, parent_id, cancel_requested_at IS NOT NULL AS requested, lease_expires_at
       FROM {schema}.gen_durable
      WHERE status = 'executing' AND lease_expires_at >= $6::timestamptz AND lease_expires_at < now()
      ORDER BY id
      LIMIT $2
      FOR NO KEY UPDATE SKIP LOCKED
   ), verdict AS (
     SELECT id, counts, counts AND suspect AS poisoned,
            counts AND NOT suspect AND reaps + 1 >= $1 AS suspected, locked_by AS lost_worker, attempt AS lost_attempt,
            parent_id, (counts AND suspect) OR requested AS ends
       FROM expired
   ), parents AS (
     SELECT p.id FROM {schema}.gen_durable p
      WHERE p.id = ANY (ARRAY(SELECT v.parent_id FROM verdict v WHERE v.ends AND v.parent_id IS NOT NULL))
      ORDER BY p.id
      FOR NO KEY UPDATE OF p SKIP LOCKED
   ), reaped AS (
   UPDATE {schema}.gen_durable g
      SET status = (CASE WHEN g.cancel_requested_at IS NOT NULL THEN 'cancelled'
                         WHEN v.poisoned THEN 'failed' ELSE 'runnable' END)::{schema}.gen_durable_status,
          attempt = CASE WHEN v.poisoned OR g.cancel_requested_at IS NOT NULL THEN g.attempt ELSE g.attempt + 1 END,
          last_error = CASE WHEN v.poisoned AND g.cancel_requested_at IS NULL
                            THEN format('poison pill: step %s lost its worker %s times, the last while it ran alone (reaper.maxReaps)', g.step, g.reaps + 1)
                            ELSE g.last_error END,
          eligible_at = CASE WHEN NOT v.poisoned AND g.cancel_requested_at IS NULL AND g.reaps > 0
                             THEN now() + make_interval(secs => random() * g.reaps * $3::float8 / 1000)
                             ELSE g.eligible_at END,
          reaps = g.reaps + CASE WHEN v.counts AND g.cancel_requested_at IS NULL THEN 1 ELSE 0 END,
          awaits = CASE WHEN v.poisoned OR g.cancel_requested_at IS NOT NULL THEN NULL ELSE g.awaits END,
          suspect = g.suspect OR (v.suspected AND g.cancel_requested_at IS NULL),
          locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, updated_at = now()
     FROM verdict v
    WHERE g.id = v.id
      AND (NOT v.ends OR v.parent_id IS NULL OR v.parent_id IN (SELECT id FROM parents))
   RETURNING g.id, g.status, g.parent_id, g.queue, g.fsm, g.step, g.reaps, v.suspected AND g.cancel_requested_at IS NULL AS suspected,
             g.claim_seq, g.last_error, v.lost_worker, v.lost_attempt,
             CASE WHEN g.fsm = ANY (COALESCE($5::text[], '{}')) THEN g.state END AS full_state
   ), recorded AS (
     INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, attempt, claim_seq, worker, outcome, error, state)
     SELECT r.id, CASE r.status WHEN 'cancelled' THEN 'cancelled' WHEN 'failed' THEN 'poisoned' ELSE 'reaped' END,
            r.step, r.lost_attempt, r.claim_seq, r.lost_worker, r.status::text,
            CASE WHEN r.status = 'failed' THEN jsonb_build_object('name', 'reason', 'message', r.last_error, 'stack', NULL) END,
            r.full_state
       FROM reaped r
      WHERE NOT (r.fsm = ANY (COALESCE($4::text[], '{}')))
   ), sweep AS (
     SELECT (extract(epoch FROM now()) * 1000)::float8 AS db_now,
            (SELECT count(*) FROM expired)::int AS seen,
            (SELECT extract(epoch FROM min(e.lease_expires_at)) * 1000 FROM expired e
              WHERE NOT EXISTS (SELECT 1 FROM reaped r WHERE r.id = e.id))::float8 AS left_at
   )
   SELECT s.db_now, s.seen, s.left_at, r.id, r.status, r.parent_id, r.queue, r.fsm, r.step, r.reaps, r.suspected
     FROM sweep s LEFT JOIN reaped r ON true`,
  {
    params: (i: {
      readonly maxReaps: number;
      readonly limit: number;
      readonly spreadMs: number;
      /** FSM names whose history is `'off'` (no row) and `'full'` (with the state), §28.1. */
      readonly historyOff?: readonly string[];
      readonly historyFull?: readonly string[];
      /** Where the scan of gen_durable_lease starts (the reaper's floor); null or absent: a full sweep. */
      readonly from?: Date | null;
    }) => [
      i.maxReaps,
      i.limit,
      i.spreadMs,
      i.historyOff ?? [],
      i.historyFull ?? [],
      i.from ?? '-infinity',
    ],
    decode: (records: readonly ReapRecord[]): ReapSweep => {
      const out: ReapedRow[] = [];
      const first = records[0];
      for (const r of records) {
        if (r.id === null) continue;
        out.push({
          id: r.id,
          status: r.status,
          parentId: r.parent_id,
          queue: r.queue,
          fsm: r.fsm,
          step: r.step,
          reaps: r.reaps,
          suspected: r.suspected,
        });
      }
      return {
        rows: out,
        dbNow: first !== undefined ? new Date(first.db_now) : new Date(),
        seen: first?.seen ?? 0,
        left: first?.left_at != null ? new Date(first.left_at) : undefined,
      };
    },
  },
);

/**
 * Startup reclaim (docs/design.md §17.3): this queue's executing rows claimed under this scheduler's
 * prefix (prefix-length compare, not LIKE) by a worker other than `$6` (this scheduler's own):
 * all of them when the node's liveness lock proved every earlier process with this nodeId gone
 * (`$3` NULL), else those whose remaining lease is below `$3` ms (a dead predecessor that
 * missed ≥ 2 beats). Back to runnable, no attempt bump. Index gen_durable_lease.
 * The predecessor died holding them, so a reclaim counts toward the poison-pill cap like a reap
 * (`reaps` + 1, spread as in REAP_EXPIRED by `$5` ms) and a row that would reach the cap `$4`
 * is left for the reaper, which gives the verdict (a suspect): a pill whose node restarts
 * quickly must not loop forever (docs/reliability.md, finding F-R3). Counted as in REAP_EXPIRED: the first loss, and
 * later ones only while the step ran (finding F-R11); a counted loss of a `suspect` (during its
 * solo run) is left for the reaper too, which fails it. A suspect lost before its solo step
 * started is reclaimed uncounted and stays a suspect.
 * A row whose cancel was requested is left for the reaper too, which cancels it with its
 * riders (docs/design.md §27.2).
 */
export const RECLAIM_PREDECESSOR = sql(
  'reclaim_predecessor',
  `WITH r AS (
     SELECT id FROM {schema}.gen_durable
      WHERE status = 'executing' AND queue = $1
        AND left(locked_by, length($2::text)) = $2::text AND locked_by <> $6::text
        AND ($3::float8 IS NULL OR lease_expires_at < now() + make_interval(secs => $3::float8 / 1000))
        AND NOT ((reaps = 0 OR started_seq IS NOT DISTINCT FROM claim_seq) AND (suspect OR reaps + 1 >= $4))
        AND cancel_requested_at IS NULL
      ORDER BY id
      FOR NO KEY UPDATE SKIP LOCKED
   )
   UPDATE {schema}.gen_durable g
      SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL,
          eligible_at = CASE WHEN g.reaps > 0
                             THEN now() + make_interval(secs => random() * g.reaps * $5::float8 / 1000)
                             ELSE g.eligible_at END,
          reaps = g.reaps + CASE WHEN g.reaps = 0 OR g.started_seq IS NOT DISTINCT FROM g.claim_seq THEN 1 ELSE 0 END,
          updated_at = now()
     FROM r WHERE g.id = r.id
   RETURNING g.id`,
  {
    params: (i: {
      readonly queue: string;
      readonly workerPrefix: string;
      /** null: every claim under the prefix (the predecessor is proven gone). */
      readonly leaseBelowMs: number | null;
      readonly maxReaps: number;
      readonly spreadMs: number;
      readonly ownWorker: string;
    }) => [i.queue, i.workerPrefix, i.leaseBelowMs, i.maxReaps, i.spreadMs, i.ownWorker],
    decode: idsOf,
  },
);

/**
 * Await-deadline sweep (docs/design.md §8.5): overdue parked rows (index gen_durable_await_deadline)
 * become runnable, eligible now, deadline cleared, awaits and attempt kept. `$1` = batch.
 */
export const FIRE_AWAIT_DEADLINES = sql(
  'fire_await_deadlines',
  `WITH due AS (
     SELECT id FROM {schema}.gen_durable
      WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL AND await_deadline <= now()
      ORDER BY id
      LIMIT $1
      FOR NO KEY UPDATE SKIP LOCKED
   )
   UPDATE {schema}.gen_durable g
      SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
     FROM due WHERE g.id = due.id
   RETURNING g.id, g.queue`,
  {
    params: (i: { readonly limit: number }) => [i.limit],
    decode: (rows: readonly IdQueue[]) => rows,
  },
);
