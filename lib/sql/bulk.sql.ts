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
 * The next batch of `cancelAll` / `retryAll` (docs/design.md §27.7), over `table`: the same
 * keyset walk as LIST_INSTANCES — at most `$3` rows below id `$2` examined newest first through
 * the `$1` driver's index (the primary key, gen_durable_failed or gen_durable_parent; see
 * {@link listCandidates}), the first `$4` hits read by primary key — answering only what the
 * action needs of each hit (fsm, version, step, status, claim token). A call that crashed part
 * way is resumed by calling again: the walk re-selects by the filter, and rows already acted on
 * are either no longer hits or answered as unchanged.
 */
function bulkBatchText(table: 'gen_durable' | 'gen_durable_all'): string {
  return `WITH cand AS (
       ${listCandidates('$1', '$2', '$3', 5, table)}
     ), scanned AS (
       SELECT count(*)::int AS n, min(c.id)::text AS last FROM cand c
     ), batch AS (
       SELECT id, fsm, fsm_version, step, status, claim_seq FROM {schema}.${table}
        WHERE id = ANY (ARRAY(SELECT c.id FROM cand c WHERE c.hit ORDER BY c.id DESC LIMIT $4))
     )
     SELECT b.*, s.n AS scanned, s.last AS last_scanned
       FROM scanned s LEFT JOIN batch b ON true
      ORDER BY b.id DESC`;
}

/** BULK_BATCH's and PURGE_BATCH's parameters and answer. */
const BULK_BATCH_CODEC = {
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
};

/**
 * `cancelAll`, `retryAll`, `holdAll`, …: the hot table only. An archived row is `done`
 * (docs/archive.md): none of these acts on it.
 */
export const BULK_BATCH = sql('bulk_batch', bulkBatchText('gen_durable'), BULK_BATCH_CODEC);

/**
 * `purgeAll`: the view gen_durable_all, so archived rows are matched and purged too
 * (PURGE_INSTANCES deletes them from the archive). The scan driver walks the hot table's
 * primary key and each archive partition's gen_durable_archive_id merged by id; the failed and
 * parent drivers their indexes on both.
 */
export const PURGE_BATCH = sql('purge_batch', bulkBatchText('gen_durable_all'), BULK_BATCH_CODEC);
