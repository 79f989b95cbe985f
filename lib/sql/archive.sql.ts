import type { Retention, RetentionOverride } from '../fsm/retention';
import { sql } from './statement';

/** The retention inputs of ARCHIVE_MOVE: the module's per status, and the FSMs' overrides. */
export interface ArchiveRetention {
  readonly retention: Retention;
  readonly overrides: readonly {
    readonly fsm: string;
    readonly retention: RetentionOverride;
  }[];
}

/**
 * Creates the archive's partitions ahead (docs/archive.md): every `$2` ('hour' | 'day', UTC)
 * range from the one holding now() up to now() + `$1` ms that does not exist yet, one partition
 * per archive table (lib/schema/v017.ts, `gen_durable_archive_extend`: registry
 * gen_durable_archive_partitions by primary key and range). Answers the ranges made.
 */
export const ARCHIVE_EXTEND = sql(
  'archive_extend',
  `SELECT {schema}.gen_durable_archive_extend(
            now() + make_interval(secs => $1::float8 / 1000), $2::text) AS made`,
  {
    params: (i: { readonly aheadMs: number; readonly grain: 'hour' | 'day' }) => [
      i.aheadMs,
      i.grain,
    ],
    decode: (rows: readonly { made: number }[]): number => rows[0]?.made ?? 0,
  },
);

/**
 * Retention of the archive (docs/archive.md): drops the partitions whose upper bound has passed
 * (`gen_durable_archive_drop`: every row in them expired), each DROP waiting 100 ms at most
 * for its lock. Answers the ranges dropped.
 */
export const ARCHIVE_DROP_EXPIRED = sql(
  'archive_drop_expired',
  `SELECT {schema}.gen_durable_archive_drop(now()) AS dropped`,
  {
    params: () => [],
    decode: (rows: readonly { dropped: number }[]): number => rows[0]?.dropped ?? 0,
  },
);

/** What one ARCHIVE_MOVE batch did. */
export interface ArchiveMoved {
  /** Instances moved (rows of gen_durable_archive written). */
  readonly instances: number;
  /** Their history rows moved. */
  readonly history: number;
  /** Their stream chunks moved. */
  readonly chunks: number;
}

interface ArchiveBatchRecord extends ArchiveMoved {
  db_now: number;
  parents_at: number | null;
  last_at: number | null;
}

/** What one ARCHIVE_MOVE batch did, and what the archive's floor learns from it. */
export interface ArchiveBatch extends ArchiveMoved {
  /** The statement's `now()`. */
  readonly dbNow: Date;
  /** The earliest end of a `done` parent of a moved row (it may move now that they left). */
  readonly parentsAt: Date | undefined;
  /**
   * The latest end among the rows it moved (truncated to the ms), or undefined for none: the
   * next batch of the same pass starts there, not at the pass's floor.
   */
  readonly lastAt: Date | undefined;
}

/**
 * The archive sweep (docs/archive.md): moves up to `$2` ended rows, oldest end first, from the
 * hot table into gen_durable_archive, with their history and stream chunks, in one statement.
 * A row moves when
 * - it is `done` (a `failed` or `cancelled` row stays: `retry` acts on it in the hot table) and
 *   ended `$1` ms ago at least: gen_durable_gc `(updated_at)` WHERE not live, walked oldest
 *   first from `$8`, the archive's floor (lib/runtime/sweep-floor.ts; `'-infinity'` for a full
 *   pass), always an index condition so the planner starts the index there: under a pinned xmin
 *   horizon the entries of the rows moved since the pin stay at the low end, dead but not
 *   prunable, and a walk from the low end visits each one's heap tuple (the walk also passes
 *   every retained `failed` and `cancelled` row, which never moves). The answer's `db_now` (the
 *   statement's `now()`) gives the floor of the next pass, and `parents_at` (the earliest end
 *   of a `done` parent of a moved row: PK probes, its status written `::text` so that no plan
 *   reads min() off gen_durable_gc) lowers it, so the next pass takes a parent
 *   whose children just left; `last_at` (the latest end moved) is where the pass's next batch
 *   starts, so a pass of many batches does not re-walk the entries its earlier batches left;
 * - it holds no correlation key in its scope (`correlation_guard IS NULL`: a key whose scope
 *   keeps finished holders stays enforced by the unique index gen_durable_correlation) and no
 *   dedup window is open on it (`dedup_until` passed): dedup scopes keep their meaning because
 *   the rows that carry them never leave the hot table before the key or window frees;
 * - its parent is neither live nor failed (the parent's join and `children` read it in the
 *   hot table, as GC spares it, and a failed parent may be retried into its join again; PK
 *   probe) and no row of the hot table names it as parent (children leave first, so none is
 *   orphaned by the FK's SET NULL; gen_durable_parent);
 * - its expiry (end + its status's retention, the FSM's override `$5..$7` else the module's
 *   `$3`, `$4`) lies ahead, before the end of the partitions that exist (a row already past it
 *   is GC's to delete; one beyond the partitions waits for maintenance to create them).
 * Rows are locked FOR UPDATE SKIP LOCKED: a row a worker, a control action or GC holds is left
 * for the next batch, nothing waits. The history (gen_durable_history_instance) and chunks
 * (gen_durable_streams_pkey) of the moved rows are copied into their archives with the same
 * expiry, then the delete's ON DELETE CASCADE removes them with the inbox and stream heads
 * (the foreign keys' triggers run at the end of the statement, after the copies read them).
 */
export const ARCHIVE_MOVE = sql(
  'archive_move',
  `WITH bound AS (
     SELECT max(p.to_at) AS until FROM {schema}.gen_durable_archive_partitions p
   ), picked AS (
     SELECT g.id, x.expires_at
       FROM {schema}.gen_durable g
       LEFT JOIN unnest($5::text[], $6::float8[], $7::float8[])
              AS o(fsm, done_ms, cancelled_ms) ON o.fsm = g.fsm
       CROSS JOIN LATERAL (
         SELECT g.updated_at + make_interval(secs => (CASE g.status
                  WHEN 'done' THEN coalesce(o.done_ms, $3::float8)
                  ELSE coalesce(o.cancelled_ms, $4::float8) END) / 1000) AS expires_at
       ) x
      WHERE g.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
        AND g.status NOT IN ('failed', 'cancelled')
        AND g.updated_at >= $8::timestamptz
        AND g.updated_at < now() - make_interval(secs => $1::float8 / 1000)
        AND g.correlation_guard IS NULL
        AND (g.dedup_until IS NULL OR g.dedup_until <= now())
        AND x.expires_at > now()
        AND x.expires_at < (SELECT until FROM bound)
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.gen_durable p
           WHERE p.id = g.parent_id
             AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children',
                              'failed'))
        AND NOT EXISTS (SELECT 1 FROM {schema}.gen_durable c WHERE c.parent_id = g.id)
      ORDER BY g.updated_at
      LIMIT $2
      FOR UPDATE OF g SKIP LOCKED
   ), moved AS (
     DELETE FROM {schema}.gen_durable g USING picked k
      WHERE g.id = k.id
     RETURNING g.*, k.expires_at
   ), history AS (
     INSERT INTO {schema}.gen_durable_history_archive
     SELECT h.*, m.expires_at FROM {schema}.gen_durable_history h JOIN moved m ON h.instance_id = m.id
     RETURNING 1
   ), chunks AS (
     INSERT INTO {schema}.gen_durable_streams_archive
     SELECT s.*, m.expires_at FROM {schema}.gen_durable_streams s JOIN moved m ON s.instance_id = m.id
     RETURNING 1
   ), archived AS (
     INSERT INTO {schema}.gen_durable_archive SELECT m.* FROM moved m
     RETURNING 1
   )
   SELECT (SELECT count(*) FROM archived)::int AS instances,
          (SELECT count(*) FROM history)::int AS history,
          (SELECT count(*) FROM chunks)::int AS chunks,
          (extract(epoch FROM now()) * 1000)::float8 AS db_now,
          (SELECT extract(epoch FROM min(p.updated_at)) * 1000 FROM {schema}.gen_durable p
            WHERE p.id = ANY (ARRAY(SELECT m.parent_id FROM moved m WHERE m.parent_id IS NOT NULL))
              AND p.status::text = 'done')::float8 AS parents_at,
          (SELECT extract(epoch FROM max(m.updated_at)) * 1000 FROM moved m)::float8 AS last_at`,
  {
    params: (
      i: ArchiveRetention & {
        readonly afterMs: number;
        readonly limit: number;
        /** Where the walk of gen_durable_gc starts (the archive's floor); null or absent: a full pass. */
        readonly from?: Date | null;
      },
    ) => [
      i.afterMs,
      i.limit,
      i.retention.done,
      i.retention.cancelled,
      i.overrides.map((o) => o.fsm),
      i.overrides.map((o) => o.retention.done ?? null),
      i.overrides.map((o) => o.retention.cancelled ?? null),
      i.from ?? '-infinity',
    ],
    decode: (rows: readonly ArchiveBatchRecord[]): ArchiveBatch => {
      const r = rows[0];
      return {
        instances: r?.instances ?? 0,
        history: r?.history ?? 0,
        chunks: r?.chunks ?? 0,
        dbNow: r !== undefined ? new Date(r.db_now) : new Date(),
        parentsAt: r?.parents_at != null ? new Date(r.parents_at) : undefined,
        lastAt: r?.last_at != null ? new Date(r.last_at) : undefined,
      };
    },
  },
);
