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
