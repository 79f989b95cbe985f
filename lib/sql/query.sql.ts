import type { InstanceView } from '../instance/instance-view';
import type { ResolvedFilter } from './resolved-filter';
import { INSTANCE_COLUMNS, type InstanceRecord, toInstanceView } from './instance.sql';
import { sql } from './statement';

/**
 * The filter → SQL builder of `list`, `count` and the bulk actions (docs/design.md §27.7).
 * Statements stay static: a filter becomes a fixed number of parameters, NULL where a field
 * does not narrow ({@link filterParams}), and one predicate over them ({@link filterMatch}).
 * Which rows are examined is chosen by a *driver*, one `UNION ALL` branch per index, gated by a
 * one-time filter on the driver parameter so only one branch runs; each branch repeats its
 * index's predicate literally (so a partial index matches in a generic plan too) and stops at
 * its LIMIT. For `list` and the bulk actions the filter predicate is evaluated on each examined
 * row as a `hit` flag, never in the branch's WHERE: a branch's LIMIT therefore bounds the rows
 * examined, whatever the filter. `count` puts it in the WHERE, so its LIMIT bounds the matches
 * (the cap), and a time budget bounds the rows examined (COUNT_INSTANCES).
 */

/** How many parameters {@link filterParams} produces. */
export const FILTER_PARAM_COUNT = 12;

/**
 * The filter's parameters in {@link filterMatch}'s order: fsm names, statuses, queue, step,
 * key, key prefix, parent id, created ≥, created <, updated ≥, updated <, error text.
 */
export function filterParams(f: ResolvedFilter): unknown[] {
  return [
    f.fsms,
    f.statuses,
    f.queue,
    f.step,
    f.correlationKey,
    f.correlationKeyPrefix,
    f.parentId,
    f.createdAfter,
    f.createdBefore,
    f.updatedAfter,
    f.updatedBefore,
    f.errorContains,
  ];
}

/**
 * The filter as one boolean expression over row alias `g`, its {@link FILTER_PARAM_COUNT}
 * parameters numbered from `$first`. A NULL parameter does not narrow.
 */
export function filterMatch(g: string, first: number): string {
  const p = (k: number): string => `$${first + k}`;
  return `((${p(0)}::text[] IS NULL OR ${g}.fsm = ANY (${p(0)}::text[]))
      AND (${p(1)}::{schema}.gen_durable_status[] IS NULL OR ${g}.status = ANY (${p(1)}::{schema}.gen_durable_status[]))
      AND (${p(2)}::text IS NULL OR ${g}.queue = ${p(2)}::text)
      AND (${p(3)}::text IS NULL OR ${g}.step = ${p(3)}::text)
      AND (${p(4)}::text IS NULL OR ${g}.correlation_key = ${p(4)}::text)
      AND (${p(5)}::text IS NULL OR starts_with(${g}.correlation_key, ${p(5)}::text))
      AND (${p(6)}::bigint IS NULL OR ${g}.parent_id = ${p(6)}::bigint)
      AND (${p(7)}::timestamptz IS NULL OR ${g}.inserted_at >= ${p(7)}::timestamptz)
      AND (${p(8)}::timestamptz IS NULL OR ${g}.inserted_at < ${p(8)}::timestamptz)
      AND (${p(9)}::timestamptz IS NULL OR ${g}.updated_at >= ${p(9)}::timestamptz)
      AND (${p(10)}::timestamptz IS NULL OR ${g}.updated_at < ${p(10)}::timestamptz)
      AND (${p(11)}::text IS NULL OR strpos(${g}.last_error, ${p(11)}::text) > 0))`;
}

/**
 * The index that drives a list (rows examined newest first, by id):
 * - `scan`: the primary key, from the cursor down;
 * - `failed`: gen_durable_failed (status = 'failed'), by id;
 * - `parent`: gen_durable_parent (the parent's children), then sorted by id.
 */
export type ListDriver = 'scan' | 'failed' | 'parent';

/**
 * The index that drives a count: the list's drivers plus gen_durable_pick (`runnable`, and
 * `runnable_queue` by queue equality) and gen_durable_lease (`executing`).
 */
export type CountDriver = ListDriver | 'runnable' | 'runnable_queue' | 'executing';

/** The driver of a list: the narrowest index the filter names entirely. */
export function listDriver(f: ResolvedFilter): ListDriver {
  if (f.parentId !== null) return 'parent';
  if (f.statuses?.length === 1 && f.statuses[0] === 'failed') return 'failed';
  return 'scan';
}

/** The driver of a count (order does not matter, so every partial index serves). */
export function countDriver(f: ResolvedFilter): CountDriver {
  const list = listDriver(f);
  if (list !== 'scan' || f.statuses?.length !== 1) return list;
  if (f.statuses[0] === 'runnable') return f.queue !== null ? 'runnable_queue' : 'runnable';
  if (f.statuses[0] === 'executing') return 'executing';
  return 'scan';
}

/**
 * The list candidates of a filter: per examined row its id and `hit` (the filter's verdict),
 * newest first below id `$after`, at most `$scan` rows, from the index `$driver` names, in
 * `table`: the hot table (the bulk actions: they act on hot rows only) or the view
 * gen_durable_all (`list`: archived rows too, docs/archive.md; the `failed` driver always reads
 * the hot table: a failed row is never archived, and the archive has no index on its status,
 * so through the view it would walk every archived row by gen_durable_archive_id). The
 * filter's parameters start at `$first` (its parent id serves the `parent` branch). Shared by
 * LIST_INSTANCES and the bulk actions, which page the same way.
 */
export function listCandidates(
  driver: string,
  after: string,
  scan: string,
  first: number,
  table: 'gen_durable' | 'gen_durable_all' = 'gen_durable',
): string {
  const hit = filterMatch('g', first);
  const parent = `$${first + 6}::bigint`;
  const below = `g.id < COALESCE(${after}::bigint, 9223372036854775807)`;
  return `(SELECT g.id, ${hit} AS hit FROM {schema}.${table} g
            WHERE ${driver}::text = 'scan' AND ${below}
            ORDER BY g.id DESC LIMIT ${scan})
   UNION ALL
   (SELECT g.id, ${hit} AS hit FROM {schema}.gen_durable g
     WHERE ${driver}::text = 'failed' AND g.status = 'failed' AND ${below}
     ORDER BY g.id DESC LIMIT ${scan})
   UNION ALL
   (SELECT g.id, ${hit} AS hit FROM {schema}.${table} g
     WHERE ${driver}::text = 'parent' AND g.parent_id = ${parent} AND ${below}
     ORDER BY g.id DESC LIMIT ${scan})`;
}

/** What `list` needs of one page: the items, and where the scan stopped. */
export interface ListAnswer {
  readonly items: InstanceView[];
  /** Rows examined (at most the scan bound). */
  readonly scanned: number;
  /** The lowest id examined, or null when none was. */
  readonly lastScanned: string | null;
}

/** One page of a filter's rows (LIST_INSTANCES input). */
export interface ListInput {
  readonly driver: ListDriver;
  /** Exclusive upper id bound (the cursor), or null from the newest. */
  readonly after: string | null;
  /** Rows examined at most. */
  readonly scan: number;
  /** Items returned at most. */
  readonly limit: number;
  readonly filter: ResolvedFilter;
}

/**
 * `list` (docs/design.md §27.7): one keyset page, newest first. `cand` examines at most `$3`
 * rows below id `$2` through the `$1` driver's index ({@link listCandidates}: the primary key,
 * gen_durable_failed or gen_durable_parent); `page` reads the first `$4` hits by primary key
 * (an id array, so the plan is PK probes, never a join over the table);
 * `scanned` says how far the scan got, so a page cut short by the scan bound still has a next
 * cursor. Answers at least one row (the scan summary; items where `id` is not NULL). Never
 * OFFSET: a page costs the same at any depth.
 */
export const LIST_INSTANCES = sql(
  'list_instances',
  `WITH cand AS (
     ${listCandidates('$1', '$2', '$3', 5, 'gen_durable_all')}
   ), scanned AS (
     SELECT count(*)::int AS n, min(c.id)::text AS last FROM cand c
   ), page AS (
     SELECT ${INSTANCE_COLUMNS} FROM {schema}.gen_durable_all
      WHERE id = ANY (ARRAY(SELECT c.id FROM cand c WHERE c.hit ORDER BY c.id DESC LIMIT $4))
   )
   SELECT p.*, s.n AS scanned, s.last AS last_scanned
     FROM scanned s LEFT JOIN page p ON true
    ORDER BY p.id DESC`,
  {
    params: (i: ListInput) => [i.driver, i.after, i.scan, i.limit, ...filterParams(i.filter)],
    decode: (
      rows: readonly ((InstanceRecord | { id: null }) & {
        scanned: number;
        last_scanned: string | null;
      })[],
    ): ListAnswer => {
      const items: InstanceView[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        if (r.id !== null) items.push(toInstanceView(r));
      }
      return {
        items,
        scanned: rows[0]?.scanned ?? 0,
        lastScanned: rows[0]?.last_scanned ?? null,
      };
    },
  },
);

/** What COUNT_INSTANCES answers: the filter's hits it saw, and the rows it pulled. */
export interface CountAnswer {
  /** Matching rows seen, at most the cap. */
  readonly count: number;
  /**
   * Rows that left the scan: the hits, plus, once the time budget ran out, the non-matching
   * rows examined after it. Below the cap: the driver's rows were all examined.
   */
  readonly pulled: number;
}

/** One COUNT_INSTANCES run: the driving index, the cap on hits, the time budget, the filter. */
export interface CountInput {
  readonly driver: CountDriver;
  readonly cap: number;
  /** Milliseconds from the statement's start after which the scan stops (at most `cap` more rows). */
  readonly budgetMs: number;
  readonly filter: ResolvedFilter;
}

/**
 * One branch of COUNT_INSTANCES: the rows of `where` (the driver's index predicate, in its
 * order `orderBy`) that match the filter, or, once the time budget `$15` ms since the
 * statement's start is spent, any row — so past the budget the branch reaches its LIMIT `$2`
 * within `$2` more rows instead of reading on to the end of the index or table.
 */
function countBranch(
  where: string,
  orderBy: string,
  table: 'gen_durable' | 'gen_durable_all' = 'gen_durable',
): string {
  const hit = filterMatch('g', 3);
  return `(SELECT ${hit} AS hit FROM {schema}.${table} g
       WHERE ${where}
         AND (${hit} OR clock_timestamp() >= statement_timestamp() + $15::int * interval '1 millisecond')
       ${orderBy} LIMIT $2)`;
}

/**
 * `count` (docs/design.md §27.7): counts the filter's matches up to the cap `$2`, reading rows
 * through the `$1` driver's index — the primary key (`scan`, a sequential scan), gen_durable_failed,
 * gen_durable_parent, gen_durable_pick (all runnable rows, or one queue's by equality) or
 * gen_durable_lease (executing rows) — and stops at the `$2`-th match. A filter the driver's
 * index does not serve entirely (an FSM name: no index has `fsm`, ARCHITECTURE.md §3) reads
 * every row of the driver's range when it has fewer than `$2` matches; the time budget `$15`
 * bounds that ({@link countBranch}): `pulled` = `$2` with `count` < `$2` means the budget ran
 * out, and `count` is then a lower bound. Each index branch is ordered as its index is: a
 * generic plan then walks the index rather than scan the table sequentially (`npm run
 * explain` showed that plan for a runnable count without the ORDER BY). The `scan` and `parent`
 * branches read the view gen_durable_all (archived rows too, docs/archive.md: the archive's
 * partitions are scanned, or read through gen_durable_archive_parent); the others name live
 * or failed rows, which are never archived.
 */
export const COUNT_INSTANCES = sql(
  'count_instances',
  `WITH cand AS (
     ${countBranch(`$1::text = 'scan'`, '', 'gen_durable_all')}
     UNION ALL
     ${countBranch(`$1::text = 'failed' AND g.status = 'failed'`, 'ORDER BY g.id')}
     UNION ALL
     ${countBranch(`$1::text = 'parent' AND g.parent_id = $9::bigint`, 'ORDER BY g.parent_id', 'gen_durable_all')}
     UNION ALL
     ${countBranch(`$1::text = 'runnable' AND g.status = 'runnable'`, 'ORDER BY g.queue, g.priority, g.eligible_at')}
     UNION ALL
     ${countBranch(
       `$1::text = 'runnable_queue' AND g.queue = $5::text AND g.status = 'runnable'`,
       'ORDER BY g.priority, g.eligible_at',
     )}
     UNION ALL
     ${countBranch(`$1::text = 'executing' AND g.status = 'executing'`, 'ORDER BY g.lease_expires_at')}
   )
   SELECT (count(*) FILTER (WHERE c.hit))::int AS count, count(*)::int AS pulled FROM cand c`,
  {
    params: (i: CountInput) => [i.driver, i.cap, ...filterParams(i.filter), i.budgetMs],
    decode: (rows: readonly CountAnswer[]): CountAnswer => rows[0] ?? { count: 0, pulled: 0 },
  },
);
