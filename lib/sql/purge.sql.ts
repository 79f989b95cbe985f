import type { TerminalStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** One row a purge deleted: what its `instance:purged` event names. */
export interface PurgedRow {
  readonly id: string;
  readonly fsm: string;
  readonly status: TerminalStatus;
}

/**
 * `purge` / `purgeAll` (docs/design.md §27.8): deletes the rows of `$1` (at most one bulk
 * batch, 1 000 ids) that are ended (done, failed, cancelled: "not live", written as GC_DELETE
 * writes it) and are not children of a live parent (the parent's join reads them, as GC spares
 * them, docs/design.md §18.1). The delete is GC_DELETE's: by primary key, cascading the inbox
 * (gen_durable_signals, through gen_durable_signals_target) and the history
 * (gen_durable_history, through gen_durable_history_instance),
 * nulling the children's `parent_id` (through gen_durable_parent). It never waits on a row
 * lock, so it cannot deadlock with GC, workers or another purge: `picked` locks the ended rows
 * `FOR UPDATE SKIP LOCKED` (primary key), `kids` locks their children the same way
 * (gen_durable_parent), and a picked row with a child it could not lock is left for a later
 * call (`victims`: every child locked). Rows skipped are simply not answered. An archived
 * row among `$1` (docs/archive.md) is deleted from gen_durable_archive with its archived
 * history and chunks (gen_durable_archive_id, gen_durable_history_archive_instance,
 * gen_durable_streams_archive_read, one probe per partition; archived rows are never locked by
 * workers). Answers the deleted rows.
 */
export const PURGE_INSTANCES = sql(
  'purge_instances',
  `WITH picked AS (
     SELECT g.id FROM {schema}.gen_durable g
      WHERE g.id = ANY ($1::bigint[])
        AND g.status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
        AND NOT EXISTS (
          SELECT 1 FROM {schema}.gen_durable p
           WHERE p.id = g.parent_id
             AND p.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children'))
      ORDER BY g.id
      FOR UPDATE OF g SKIP LOCKED
   ), kids AS (
     SELECT c.parent_id FROM {schema}.gen_durable c
      WHERE c.parent_id = ANY (ARRAY(SELECT id FROM picked))
      FOR UPDATE OF c SKIP LOCKED
   ), victims AS (
     SELECT k.id FROM picked k
      WHERE (SELECT count(*) FROM {schema}.gen_durable c WHERE c.parent_id = k.id)
          = (SELECT count(*) FROM kids WHERE kids.parent_id = k.id)
   ), hot AS (
     DELETE FROM {schema}.gen_durable g
      WHERE g.id = ANY (ARRAY(SELECT id FROM victims))
     RETURNING g.id::text AS id, g.fsm, g.status::text AS status
   ), archived AS (
     DELETE FROM {schema}.gen_durable_archive a
      WHERE a.id = ANY ($1::bigint[])
     RETURNING a.id, a.fsm, a.status::text AS status
   ), archived_history AS (
     DELETE FROM {schema}.gen_durable_history_archive h
      WHERE h.instance_id = ANY (ARRAY(SELECT id FROM archived))
   ), archived_chunks AS (
     DELETE FROM {schema}.gen_durable_streams_archive c
      WHERE c.instance_id = ANY (ARRAY(SELECT id FROM archived))
   )
   SELECT id, fsm, status FROM hot
   UNION ALL
   SELECT id::text, fsm, status FROM archived`,
  {
    params: (i: { readonly ids: readonly string[] }) => [i.ids],
    decode: (rows: readonly PurgedRow[]): PurgedRow[] => rows.slice(),
  },
);
