import { sql } from './statement';

/** A limit declaration as stored (LIMIT_CONFIGS). */
export interface LimitConfigRecord {
  readonly kind: 'conc' | 'rate';
  readonly name: string;
  readonly rate: number | null;
  readonly capacity: number;
  readonly shards: number;
}

/** One counted key of the PostgreSQL limiter (LIMIT_COUNTERS), its shards summed. */
export interface LimitCounterRecord {
  readonly kind: 'conc' | 'rate';
  readonly key: string;
  readonly name: string;
  readonly shards: number;
  readonly capacity: number;
  /** Gate: free slots; rate: tokens refilled to now. */
  readonly available: number;
  /** Tokens per second (rate), else null. */
  readonly rate: number | null;
}

/**
 * Every stored limit declaration (gen_durable_bucket_configs, primary-key order; one row per
 * configured gate or rate limit, a handful).
 */
export const LIMIT_CONFIGS = sql(
  'limit_configs',
  `SELECT kind, name, rate, capacity, shards FROM {schema}.gen_durable_bucket_configs ORDER BY kind, name`,
  {
    params: (_i: void) => [],
    decode: (rows: readonly LimitConfigRecord[]): LimitConfigRecord[] => [...rows],
  },
);

/**
 * The limiter's counters (docs/design.md §30 limiters view): the first `$1` counter rows of
 * gen_durable_buckets in primary-key order (kind, key, shard) — never more — grouped by key:
 * shards, capacity, and what is available now (free gate slots; rate tokens refilled to now()
 * as ADMIT computes them, from the key's config by primary key). `truncated` when the scan
 * stopped at `$1` rows (the last key may then be missing shards).
 */
export const LIMIT_COUNTERS = sql(
  'limit_counters',
  `WITH b AS (
     SELECT kind, key, shard, capacity, available, last_refill
       FROM {schema}.gen_durable_buckets ORDER BY kind, key, shard LIMIT $1
   )
   SELECT b.kind, b.key, split_part(b.key, ':', 1) AS name, count(*)::int AS shards,
          sum(b.capacity) AS capacity,
          CASE WHEN b.kind = 'conc' THEN sum(b.available)
               ELSE sum(LEAST(b.capacity, b.available
                      + GREATEST(0, extract(epoch FROM now() - COALESCE(b.last_refill, now())))
                        * COALESCE(c.rate, 0) / GREATEST(c.shards, 1))) END AS available,
          max(c.rate) AS rate,
          (SELECT count(*) FROM b) >= $1 AS truncated
     FROM b LEFT JOIN {schema}.gen_durable_bucket_configs c
       ON c.kind = b.kind AND c.name = split_part(b.key, ':', 1)
    GROUP BY b.kind, b.key
    ORDER BY b.kind, b.key`,
  {
    params: (i: { readonly limit: number }) => [i.limit],
    decode: (
      rows: readonly (LimitCounterRecord & { truncated: boolean })[],
    ): { counters: LimitCounterRecord[]; truncated: boolean } => ({
      counters: rows.map(({ truncated: _t, ...r }) => r),
      truncated: rows.some((r) => r.truncated),
    }),
  },
);
