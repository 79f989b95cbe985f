import type { CappedCount, QueuePause, QueueStatus } from '../instance/queue-status';
import { noRows } from './row-decoders';
import { noParams, sql } from './statement';

/** What PAUSE_QUEUE answers: the pause now stored, and whether this statement created it. */
export interface PauseAnswer extends QueuePause {
  /** False when the queue was already paused (its `pausedAt` kept, its reason replaced if given). */
  readonly created: boolean;
}

/** One queue as QUEUE_STATUS reads it: its pause and its capped row counts. */
export type QueueStatusRecord = Omit<QueueStatus, 'served'>;

interface PauseRecord {
  queue: string;
  reason: string | null;
  paused_at: Date;
}

function pauseOf(r: PauseRecord): QueuePause {
  return { queue: r.queue, reason: r.reason, pausedAt: r.paused_at };
}

/**
 * Pauses queue `$1` fleet-wide with reason `$2` (NULL keeps a stored one): `ins` stores a new
 * pause; when the queue is already paused, `upd` replaces only its reason, so `paused_at`
 * stays the first pause's. Primary key of gen_durable_paused_queues. Zero rows when a
 * concurrent pause committed after this statement's snapshot (ON CONFLICT saw it, the UPDATE's
 * snapshot does not): the caller runs it again and finds it.
 */
export const PAUSE_QUEUE = sql(
  'pause_queue',
  `WITH ins AS (
     INSERT INTO {schema}.gen_durable_paused_queues (queue, reason) VALUES ($1, $2)
     ON CONFLICT (queue) DO NOTHING
     RETURNING queue, reason, paused_at
   ), upd AS (
     UPDATE {schema}.gen_durable_paused_queues p SET reason = COALESCE($2, p.reason)
      WHERE p.queue = $1 AND NOT EXISTS (SELECT 1 FROM ins)
      RETURNING p.queue, p.reason, p.paused_at
   )
   SELECT queue, reason, paused_at, true AS created FROM ins
   UNION ALL
   SELECT queue, reason, paused_at, false AS created FROM upd`,
  {
    params: (i: { readonly queue: string; readonly reason: string | null }) => [i.queue, i.reason],
    decode: (rows: readonly (PauseRecord & { created: boolean })[]): PauseAnswer | null => {
      const r = rows[0];
      return r ? { ...pauseOf(r), created: r.created } : null;
    },
  },
);

/**
 * Resumes queue `$1`: deletes its pause (primary key). Answers the pause it removed, or null
 * when the queue was not paused. The claim's next probe finds no row.
 */
export const RESUME_QUEUE = sql(
  'resume_queue',
  `DELETE FROM {schema}.gen_durable_paused_queues WHERE queue = $1
   RETURNING queue, reason, paused_at`,
  {
    params: (i: { readonly queue: string }) => [i.queue],
    decode: (rows: readonly PauseRecord[]): QueuePause | null =>
      rows[0] ? pauseOf(rows[0]) : null,
  },
);

/**
 * The pause of queue `$1`, or null (primary key). Run only by a scheduler that holds buffered
 * rows and made no claim this poll tick (a claim already answers its queue's pause), so an
 * unpaused queue's picks pay nothing for it (docs/design.md §27.6).
 */
export const READ_QUEUE_PAUSE = sql(
  'read_queue_pause',
  `SELECT queue, reason, paused_at FROM {schema}.gen_durable_paused_queues WHERE queue = $1`,
  {
    params: (i: { readonly queue: string }) => [i.queue],
    decode: (rows: readonly PauseRecord[]): QueuePause | null =>
      rows[0] ? pauseOf(rows[0]) : null,
  },
);

/**
 * Turns JIT compilation off for the rest of the transaction, before QUEUE_STATUS: its planner
 * cost is its per-queue counts times the estimated number of queues (an unanalysed
 * gen_durable_paused_queues alone is estimated at ~1 400 rows), far above `jit_above_cost`,
 * and JIT then spent ~870 ms of a 20 ms statement (`npm run explain`-style run, 60 000 runnable
 * rows, PostgreSQL 15). No table touched.
 */
export const SET_LOCAL_NO_JIT = sql('set_local_no_jit', `SET LOCAL jit = off`, {
  params: noParams,
  decode: noRows,
});

/**
 * `queueStatus` (docs/design.md §27.6): the queues named in `$1`, every paused queue and every
 * queue holding a runnable row — the last found by a loose index scan of gen_durable_pick
 * (`seen`: one index probe per distinct queue, never a scan of the rows) — restricted to `$3`
 * when given; per queue its pause and three counts capped at `$2`: runnable and due rows
 * (gen_durable_pick, queue equality) and executing rows (gen_durable_lease: the executing rows
 * only, filtered by queue). Each count is ordered as its index is, so even a generic plan
 * walks the index and stops at the cap instead of a sequential scan that stops at the cap's
 * worth of matches (measured with `npm run explain`).
 */
export const QUEUE_STATUS = sql(
  'queue_status',
  `WITH RECURSIVE seen AS (
     (SELECT g.queue FROM {schema}.gen_durable g WHERE g.status = 'runnable' ORDER BY g.queue LIMIT 1)
     UNION ALL
     SELECT (SELECT g.queue FROM {schema}.gen_durable g
              WHERE g.status = 'runnable' AND g.queue > s.queue ORDER BY g.queue LIMIT 1)
       FROM seen s WHERE s.queue IS NOT NULL
   ), names AS (
     SELECT queue FROM seen WHERE queue IS NOT NULL
     UNION SELECT queue FROM {schema}.gen_durable_paused_queues
     UNION SELECT unnest($1::text[])
   )
   SELECT n.queue, p.reason, p.paused_at, p.queue IS NOT NULL AS paused,
          (SELECT count(*)::int FROM (SELECT 1 FROM {schema}.gen_durable g
             WHERE g.queue = n.queue AND g.status = 'runnable'
             ORDER BY g.priority, g.eligible_at LIMIT $2) x) AS runnable,
          (SELECT count(*)::int FROM (SELECT 1 FROM {schema}.gen_durable g
             WHERE g.queue = n.queue AND g.status = 'runnable' AND g.eligible_at <= now()
             ORDER BY g.priority, g.eligible_at LIMIT $2) x) AS due,
          (SELECT count(*)::int FROM (SELECT 1 FROM {schema}.gen_durable g
             WHERE g.status = 'executing' AND g.queue = n.queue
             ORDER BY g.lease_expires_at LIMIT $2) x) AS executing
     FROM names n LEFT JOIN {schema}.gen_durable_paused_queues p ON p.queue = n.queue
    WHERE $3::text IS NULL OR n.queue = $3
    ORDER BY n.queue`,
  {
    params: (i: {
      readonly queues: readonly string[];
      readonly cap: number;
      readonly only: string | null;
    }) => [i.queues, i.cap, i.only],
    decode: (
      rows: readonly {
        queue: string;
        reason: string | null;
        paused_at: Date | null;
        paused: boolean;
        runnable: number;
        due: number;
        executing: number;
      }[],
      i: { readonly cap: number },
    ): QueueStatusRecord[] => {
      const capped = (count: number): CappedCount => ({ count, capped: count >= i.cap });
      const out: QueueStatusRecord[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        out[k] = {
          queue: r.queue,
          paused: r.paused,
          reason: r.reason,
          pausedAt: r.paused_at,
          runnable: capped(r.runnable),
          due: capped(r.due),
          executing: capped(r.executing),
        };
      }
      return out;
    },
  },
);
