import { affectedRows, idsOf } from './row-decoders';
import { sql } from './statement';

/**
 * GC select (docs/design.md §18.1): up to `$2` terminal rows (done, failed, cancelled: "not
 * live", written exactly as the predicate of index gen_durable_gc) older than `$1` ms,
 * skipping children of live parents (PK probe per candidate with a parent).
 */
export const GC_SELECT_TERMINAL = sql(
  'gc_select_terminal',
  `SELECT g.id
     FROM {schema}.gen_durable g
    WHERE g.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
      AND g.updated_at < now() - make_interval(secs => $1::float8 / 1000)
      AND NOT EXISTS (
        SELECT 1 FROM {schema}.gen_durable p
         WHERE p.id = g.parent_id
           AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))
    ORDER BY g.updated_at
    LIMIT $2`,
  {
    params: (i: { readonly retentionMs: number; readonly limit: number }) => [
      i.retentionMs,
      i.limit,
    ],
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
