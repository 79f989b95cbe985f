import { affectedRows } from './row-decoders';
import { sql } from './statement';

/**
 * The once-a-minute stats snapshot (docs/design.md §30; docs/dashboard-data.md): one row per
 * queue per minute in gen_durable_stats, written by whichever maintenance node gets there
 * first, read by the dashboard's overview.
 */

/** The statuses and per-minute outcomes a snapshot row counts (keys of its `counts`). */
export const SNAPSHOT_COUNTS = [
  'runnable',
  'scheduled',
  'executing',
  'awaiting_signal',
  'awaiting_children',
  'done',
  'failed',
  'cancelled',
] as const;

/** One of {@link SNAPSHOT_COUNTS}. */
export type SnapshotCountName = (typeof SNAPSHOT_COUNTS)[number];

/** A stored snapshot row: the minute, the queue, its counts and which of them hit the cap. */
export interface SnapshotRecord {
  readonly at: Date;
  readonly queue: string;
  readonly counts: Readonly<Record<SnapshotCountName, number>>;
  readonly capped: readonly SnapshotCountName[];
  readonly oldestRunnableAt: Date | null;
}

interface RawSnapshot {
  at: Date;
  queue: string;
  counts: Partial<Record<SnapshotCountName, number>> & { capped?: SnapshotCountName[] };
  oldest_runnable_at: Date | null;
}

function snapshotOf(r: RawSnapshot): SnapshotRecord {
  const counts = {} as Record<SnapshotCountName, number>;
  for (const name of SNAPSHOT_COUNTS) counts[name] = Number(r.counts[name] ?? 0);
  return {
    at: r.at,
    queue: r.queue,
    counts,
    capped: r.counts.capped ?? [],
    oldestRunnableAt: r.oldest_runnable_at,
  };
}

/**
 * A queue's (`n.queue`) runnable rows from `bound` on, summed over its lanes (`lanes l`) and
 * capped at `$1`: per lane a range of gen_durable_pick from (queue, priority, the bound), at most
 * `$1` rows a lane. WRITE_STATS_SNAPSHOT's runnable count (from the lane's earliest live row)
 * and scheduled count (from `now()`).
 */
function runnableOfQueueFrom(bound: string): string {
  return `(SELECT LEAST(COALESCE(sum(x.n), 0), $1)::int FROM lanes l
               CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {schema}.gen_durable g
                 WHERE g.queue = l.queue AND g.priority = l.priority AND g.status = 'runnable'
                   AND ${bound}
                 ORDER BY g.eligible_at LIMIT $1) y) x
              WHERE l.queue = n.queue)`;
}

/**
 * Writes the current minute's snapshot (`date_trunc('minute', now())`, database clock) unless
 * one exists: a one-time filter on the primary key (gen_durable_stats_pkey, leading `at`) skips
 * every count when any node already wrote the minute, and `ON CONFLICT (at, queue) DO NOTHING`
 * settles two nodes racing past it, so a minute is written once, never counted twice.
 * Answers the queues written (none: another node had the minute).
 *
 * Every count stops at `$1`, and each is served by an index:
 * - `lanes`: a loose scan of gen_durable_pick, one probe per distinct (queue, priority) of the
 *   runnable rows, each taking its earliest `eligible_at` — the queues with runnable rows and,
 *   per queue, the oldest runnable row (`oldest_runnable_at`, NULL when none is due yet);
 * - runnable / scheduled (runnable, `eligible_at` in the future): per lane, a range of
 *   gen_durable_pick from (queue, priority, the lane's earliest `eligible_at`), resp. from
 *   `now()`, at most `$1` a lane and `$1` summed — the same counts as a walk of the queue from
 *   its head, without the head's dead entries (a pinned horizon keeps them; the lane's probe
 *   walked them once) or the due rows before the scheduled ones;
 * - executing: gen_durable_lease (executing rows only), at most `$1` rows in all;
 * - done / failed / cancelled: rows that ended in the previous minute, a range of
 *   gen_durable_gc on `updated_at` (predicate written exactly as the index's), at most `$1`;
 * - awaiting_signal / awaiting_children: gen_durable_parked (parked rows only, v19), at most
 *   `$1` rows in all, index-only.
 * A count from a shared scan that reached `$1` is listed in `counts.capped` for every queue.
 */
export const WRITE_STATS_SNAPSHOT = sql(
  'write_stats_snapshot',
  `WITH RECURSIVE lanes AS (
     (SELECT g.queue, g.priority, g.eligible_at FROM {schema}.gen_durable g
       WHERE g.status = 'runnable'
       ORDER BY g.queue, g.priority, g.eligible_at LIMIT 1)
     UNION ALL
     SELECT n.queue, n.priority, n.eligible_at
       FROM lanes l
       CROSS JOIN LATERAL (
         SELECT g.queue, g.priority, g.eligible_at FROM {schema}.gen_durable g
          WHERE g.status = 'runnable' AND (g.queue, g.priority) > (l.queue, l.priority)
          ORDER BY g.queue, g.priority, g.eligible_at LIMIT 1) n
   ), executing AS (
     SELECT g.queue FROM {schema}.gen_durable g
      WHERE g.status = 'executing' ORDER BY g.lease_expires_at LIMIT $1
   ), parked AS (
     SELECT g.queue, g.status::text AS status FROM {schema}.gen_durable g
      WHERE g.status IN ('awaiting_signal', 'awaiting_children') LIMIT $1
   ), finished AS (
     SELECT g.queue, g.status::text AS status FROM {schema}.gen_durable g
      WHERE g.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
        AND g.updated_at >= date_trunc('minute', now()) - interval '1 minute'
        AND g.updated_at < date_trunc('minute', now())
      ORDER BY g.updated_at LIMIT $1
   ), shared AS (
     SELECT (SELECT count(*) FROM executing) >= $1 AS executing_capped,
            (SELECT count(*) FROM parked) >= $1 AS parked_capped,
            (SELECT count(*) FROM finished) >= $1 AS finished_capped
   ), names AS (
     SELECT queue FROM lanes
     UNION SELECT queue FROM executing
     UNION SELECT queue FROM parked
     UNION SELECT queue FROM finished
     UNION SELECT queue FROM {schema}.gen_durable_paused_queues
   ), counted AS MATERIALIZED ( -- read twice below: inlined, each count ran twice
     SELECT n.queue,
            ${runnableOfQueueFrom('g.eligible_at >= l.eligible_at')} AS runnable,
            ${runnableOfQueueFrom('g.eligible_at > now()')} AS scheduled,
            (SELECT count(*)::int FROM executing e WHERE e.queue = n.queue) AS executing,
            (SELECT count(*)::int FROM parked p
              WHERE p.queue = n.queue AND p.status = 'awaiting_signal') AS awaiting_signal,
            (SELECT count(*)::int FROM parked p
              WHERE p.queue = n.queue AND p.status = 'awaiting_children') AS awaiting_children,
            (SELECT count(*)::int FROM finished f
              WHERE f.queue = n.queue AND f.status = 'done') AS done,
            (SELECT count(*)::int FROM finished f
              WHERE f.queue = n.queue AND f.status = 'failed') AS failed,
            (SELECT count(*)::int FROM finished f
              WHERE f.queue = n.queue AND f.status = 'cancelled') AS cancelled,
            (SELECT min(l.eligible_at) FROM lanes l WHERE l.queue = n.queue) AS oldest
       FROM names n
   )
   INSERT INTO {schema}.gen_durable_stats (at, queue, counts, oldest_runnable_at)
   SELECT date_trunc('minute', now()), c.queue,
          jsonb_build_object(
            'runnable', c.runnable, 'scheduled', c.scheduled, 'executing', c.executing,
            'awaiting_signal', c.awaiting_signal, 'awaiting_children', c.awaiting_children,
            'done', c.done, 'failed', c.failed, 'cancelled', c.cancelled,
            'capped', to_jsonb(array_remove(ARRAY[
              CASE WHEN c.runnable >= $1 THEN 'runnable' END,
              CASE WHEN c.scheduled >= $1 THEN 'scheduled' END,
              CASE WHEN s.executing_capped THEN 'executing' END,
              CASE WHEN s.parked_capped THEN 'awaiting_signal' END,
              CASE WHEN s.parked_capped THEN 'awaiting_children' END,
              CASE WHEN s.finished_capped THEN 'done' END,
              CASE WHEN s.finished_capped THEN 'failed' END,
              CASE WHEN s.finished_capped THEN 'cancelled' END], NULL))),
          CASE WHEN c.oldest <= now() THEN c.oldest END
     FROM counted c CROSS JOIN shared s
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.gen_durable_stats t
                       WHERE t.at = date_trunc('minute', now()))
   ON CONFLICT (at, queue) DO NOTHING
   RETURNING queue`,
  {
    params: (i: { readonly cap: number }) => [i.cap],
    decode: (rows: readonly { queue: string }[]): string[] => rows.map((r) => r.queue),
  },
);

/** Deletes snapshot rows older than `$1` ms (a range of gen_durable_stats_pkey on `at`). */
export const PRUNE_STATS = sql(
  'prune_stats',
  `DELETE FROM {schema}.gen_durable_stats
    WHERE at < now() - make_interval(secs => $1::float8 / 1000)`,
  {
    params: (i: { readonly retentionMs: number }) => [i.retentionMs],
    decode: affectedRows,
  },
);

/**
 * The newest snapshot minute's rows (`max(at)`: one backward probe of gen_durable_stats_pkey,
 * then its range), oldest queue name first; none when the table is empty.
 */
export const LATEST_STATS = sql(
  'latest_stats',
  `SELECT s.at, s.queue, s.counts, s.oldest_runnable_at
     FROM {schema}.gen_durable_stats s
    WHERE s.at = (SELECT max(t.at) FROM {schema}.gen_durable_stats t)
    ORDER BY s.queue`,
  {
    params: (_i: void) => [],
    decode: (rows: readonly RawSnapshot[]): SnapshotRecord[] => rows.map(snapshotOf),
  },
);

/**
 * Snapshot rows of the last `$1` minutes (database clock; a range of gen_durable_stats_pkey on
 * `at`), oldest first: the overview's sparklines.
 */
export const STATS_SERIES = sql(
  'stats_series',
  `SELECT s.at, s.queue, s.counts, s.oldest_runnable_at
     FROM {schema}.gen_durable_stats s
    WHERE s.at > date_trunc('minute', now()) - make_interval(mins => $1::int)
    ORDER BY s.at, s.queue`,
  {
    params: (i: { readonly minutes: number }) => [i.minutes],
    decode: (rows: readonly RawSnapshot[]): SnapshotRecord[] => rows.map(snapshotOf),
  },
);

/** The database clock's current minute (`date_trunc('minute', now())`). No table touched. */
export const CURRENT_MINUTE = sql('current_minute', `SELECT date_trunc('minute', now()) AS at`, {
  params: (_i: void) => [],
  decode: (rows: readonly { at: Date }[]): Date => (rows[0] as { at: Date }).at,
});
