import type { Retention, RetentionOverride } from '../fsm/retention';
import { affectedRows, idsOf } from './row-decoders';
import { sql } from './statement';

/**
 * GC select (docs/design.md §18.1): up to `$2` ended rows (done, failed, cancelled: "not live",
 * written exactly as the predicate of index gen_durable_gc) older than their retention, skipping
 * children of live parents (PK probe per candidate with a parent). A row's retention is its
 * FSM's override for its status (`$6..$9`: fsm names and their done / failed / cancelled ms, NULL
 * where the FSM keeps the module's), else the module's (`$3` done, `$4` failed, `$5`
 * cancelled). `$1` is the shortest of them all: the range of gen_durable_gc the scan walks
 * (oldest first); rows in it kept longer by their own retention are passed over.
 */
export const GC_SELECT_TERMINAL = sql(
  'gc_select_terminal',
  `SELECT g.id
     FROM {schema}.gen_durable g
     LEFT JOIN unnest($6::text[], $7::float8[], $8::float8[], $9::float8[])
            AS o(fsm, done_ms, failed_ms, cancelled_ms) ON o.fsm = g.fsm
    WHERE g.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
      AND g.updated_at < now() - make_interval(secs => $1::float8 / 1000)
      AND g.updated_at < now() - make_interval(secs => (CASE g.status
            WHEN 'done' THEN coalesce(o.done_ms, $3::float8)
            WHEN 'failed' THEN coalesce(o.failed_ms, $4::float8)
            ELSE coalesce(o.cancelled_ms, $5::float8) END) / 1000)
      AND NOT EXISTS (
        SELECT 1 FROM {schema}.gen_durable p
         WHERE p.id = g.parent_id
           AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))
    ORDER BY g.updated_at
    LIMIT $2`,
  {
    params: (i: {
      readonly limit: number;
      readonly retention: Retention;
      readonly overrides: readonly {
        readonly fsm: string;
        readonly retention: RetentionOverride;
      }[];
    }) => {
      const all = [
        i.retention.done,
        i.retention.failed,
        i.retention.cancelled,
        ...i.overrides.flatMap((o) => Object.values(o.retention)),
      ];
      return [
        Math.min(...all),
        i.limit,
        i.retention.done,
        i.retention.failed,
        i.retention.cancelled,
        i.overrides.map((o) => o.fsm),
        i.overrides.map((o) => o.retention.done ?? null),
        i.overrides.map((o) => o.retention.failed ?? null),
        i.overrides.map((o) => o.retention.cancelled ?? null),
      ];
    },
    decode: idsOf,
  },
);

/**
 * GC delete by ids (PK scan; a subquery delete would seq-scan). Re-checks terminality.
 * Cascades the inbox, nulls children's parent_id.
 */
export const GC_DELETE = sql(
  'gc_delete',
  `DELETE FROM {schema}.gen_durable WHERE id = ANY ($1::bigint[]) 
     AND status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`,
  { params: (i: { readonly ids: readonly string[] }) => [i.ids], decode: affectedRows },
);

/** The queues whose rows one priority-aging pass raised (AGE_PRIORITIES), each once. */
export interface AgedQueues {
  readonly count: number;
  readonly queues: readonly string[];
}

/**
 * Priority aging ([operations](docs/operations.md#priority-aging)): runnable rows, not held,
 * that have been due for at least `$2` ms and untouched for as long (`updated_at`: each step
 * of aging touches it, so a row gains one step per `$2` ms of waiting) move one priority step
 * up (`priority - 1`), never past `$1`; at most `$3` rows per pass, longest-waiting first in
 * each (queue, priority). Driven by gen_durable_pick `(queue, priority, eligible_at)`, the
 * claim's own index, without touching its order: a skip scan finds each (queue, priority)
 * above `$1` holding runnable rows (one probe per pair), and each pair's due range is read in
 * index order. Skip-locked: a row being claimed or signalled is left for the next pass.
 */
export const AGE_PRIORITIES = sql(
  'age_priorities',
  `WITH RECURSIVE pairs AS (
     (SELECT queue, priority FROM {schema}.gen_durable
       WHERE status = 'runnable' AND priority > $1::smallint
       ORDER BY queue, priority LIMIT 1)
     UNION ALL
     SELECT n.queue, n.priority FROM pairs p, LATERAL (
       SELECT g.queue, g.priority FROM {schema}.gen_durable g
        WHERE g.status = 'runnable' AND g.priority > $1::smallint
          AND (g.queue, g.priority) > (p.queue, p.priority)
        ORDER BY g.queue, g.priority LIMIT 1) n
   ), due AS (
     SELECT c.id FROM pairs p, LATERAL (
       SELECT g.id FROM {schema}.gen_durable g
        WHERE g.status = 'runnable' AND g.queue = p.queue AND g.priority = p.priority
          AND g.eligible_at <= now() - make_interval(secs => $2::float8 / 1000)
          AND g.updated_at <= now() - make_interval(secs => $2::float8 / 1000)
          AND g.held_at IS NULL
        ORDER BY g.eligible_at
        LIMIT $3) c
     LIMIT $3
   ), locked AS (
     SELECT g.id FROM {schema}.gen_durable g JOIN due ON due.id = g.id
      WHERE g.status = 'runnable'
      ORDER BY g.id
        FOR NO KEY UPDATE OF g SKIP LOCKED
   ), aged AS (
     UPDATE {schema}.gen_durable g
        SET priority = GREATEST($1::smallint, g.priority - 1), updated_at = now()
       FROM locked WHERE g.id = locked.id
     RETURNING g.queue
   )
   SELECT count(*)::int AS count, COALESCE(array_agg(DISTINCT queue), '{}') AS queues FROM aged`,
  {
    params: (i: { readonly floor: number; readonly afterMs: number; readonly batch: number }) => [
      i.floor,
      i.afterMs,
      i.batch,
    ],
    decode: (rows: readonly { count: number; queues: string[] }[]): AgedQueues => ({
      count: rows[0]?.count ?? 0,
      queues: rows[0]?.queues ?? [],
    }),
  },
);
