import { sql } from './statement';

/** What FAIRNESS_HEADS is asked: one queue or every fair queue, heads per queue, count cap. */
export interface FairnessHeadsInput {
  readonly queue: string | null;
  readonly limit: number;
  readonly cap: number;
}

/** One head of FAIRNESS_HEADS (a queue without heads is not answered). Counts are ≤ cap + 1. */
export interface FairnessHeadRow {
  readonly queue: string;
  /** The queue's heads, counted up to cap + 1. */
  readonly keys: number;
  readonly key: string;
  readonly vtime: number;
  readonly runnable: number;
  readonly due: number;
  readonly executing: number;
  readonly headId: string | null;
  readonly headPriority: number | null;
  readonly headEligibleAt: Date | null;
  readonly headWeight: number | null;
  readonly headAgeMs: number | null;
}

interface FairnessHeadRecord {
  readonly queue: string;
  readonly keys: string;
  readonly key: string;
  readonly vtime: number;
  readonly runnable: string;
  readonly due: string;
  readonly executing: string;
  readonly head_id: string | null;
  readonly head_priority: number | null;
  readonly head_eligible_at: Date | null;
  readonly head_weight: number | null;
  readonly head_age_ms: number | null;
}

/**
 * `fairnessHeads` (docs/many-tenants.md "Seeing the heads"): the fairness heads of each fair
 * queue (`$1`, or every queue with a head), the first `$2` of each in the fair claim's order
 * (`vtime`), with per key capped counts and the row the claim serves next. Every read is a
 * bounded index read:
 * - queues: a recursive skip scan of gen_durable_fair_keys_pkey (queue, fairness_key), one
 *   probe per fair queue (at most 100 queues);
 * - keys: the queue's heads counted up to `$3` + 1 on the same primary key (index-only);
 * - heads: the first `$2` in `vtime` order by gen_durable_fair_keys_walk (queue, vtime), as
 *   CLAIM_FAIR walks them;
 * - runnable / due: the key's runnable rows counted up to `$3` + 1 on gen_durable_fair_pick
 *   (queue, fairness_key, priority, eligible_at; its predicate is `status = 'runnable'`), due
 *   ones with `eligible_at <= now()` and not held;
 * - executing: the key's executing rows counted up to `$3` + 1 on gen_durable_fair_live
 *   (queue, fairness_key, status), index-only;
 * - head: the key's next due, unheld row in the claim's order (priority, eligible_at), one
 *   `LIMIT 1` probe of gen_durable_fair_pick, as CLAIM_FAIR's per key probe; its age by the
 *   database clock.
 * At most 100 × `$2` heads, each costing at most 3 × (`$3` + 1) index tuples: an operator's read.
 */
export const FAIRNESS_HEADS = sql(
  'fairness_heads',
  `WITH RECURSIVE queues AS (
     (SELECT f.queue FROM {schema}.gen_durable_fair_keys f
       WHERE f.queue >= COALESCE($1::text, '') AND ($1::text IS NULL OR f.queue = $1::text)
       ORDER BY f.queue LIMIT 1)
     UNION ALL
     SELECT (SELECT f.queue FROM {schema}.gen_durable_fair_keys f
              WHERE f.queue > q.queue AND $1::text IS NULL
              ORDER BY f.queue LIMIT 1)
       FROM queues q
      WHERE q.queue IS NOT NULL
   ), fair AS (
     SELECT q.queue FROM queues q WHERE q.queue IS NOT NULL LIMIT 100
   )
   SELECT q.queue, kc.n AS keys, h.fairness_key AS key, h.vtime,
          (SELECT count(*) FROM (SELECT 1 FROM {schema}.gen_durable x
                                  WHERE x.queue = q.queue AND x.fairness_key = h.fairness_key
                                    AND x.status = 'runnable'
                                  LIMIT $3 + 1) r) AS runnable,
          (SELECT count(*) FROM (SELECT 1 FROM {schema}.gen_durable x
                                  WHERE x.queue = q.queue AND x.fairness_key = h.fairness_key
                                    AND x.status = 'runnable' AND x.eligible_at <= now()
                                    AND x.held_at IS NULL
                                  LIMIT $3 + 1) d) AS due,
          (SELECT count(*) FROM (SELECT 1 FROM {schema}.gen_durable x
                                  WHERE x.queue = q.queue AND x.fairness_key = h.fairness_key
                                    AND x.status = 'executing'
                                  LIMIT $3 + 1) e) AS executing,
          n.id::text AS head_id, n.priority AS head_priority, n.eligible_at AS head_eligible_at,
          n.fairness_weight AS head_weight,
          (EXTRACT(EPOCH FROM now() - n.eligible_at) * 1000)::float8 AS head_age_ms
     FROM fair q
     CROSS JOIN LATERAL (
       SELECT count(*) AS n FROM (SELECT 1 FROM {schema}.gen_durable_fair_keys k
                                   WHERE k.queue = q.queue LIMIT $3 + 1) c
     ) kc
     CROSS JOIN LATERAL (
       SELECT f.fairness_key, f.vtime FROM {schema}.gen_durable_fair_keys f
        WHERE f.queue = q.queue
        ORDER BY f.vtime
        LIMIT $2
     ) h
     LEFT JOIN LATERAL (
       SELECT x.id, x.priority, x.eligible_at, x.fairness_weight
         FROM {schema}.gen_durable x
        WHERE x.queue = q.queue AND x.fairness_key = h.fairness_key AND x.status = 'runnable'
          AND x.eligible_at <= now() AND x.held_at IS NULL
        ORDER BY x.priority, x.eligible_at
        LIMIT 1
     ) n ON true
    ORDER BY q.queue, h.vtime, h.fairness_key`,
  {
    params: (i: FairnessHeadsInput) => [i.queue, i.limit, i.cap],
    decode: (rows: readonly FairnessHeadRecord[]): FairnessHeadRow[] =>
      rows.map((r) => ({
        queue: r.queue,
        keys: Number(r.keys),
        key: r.key,
        vtime: r.vtime,
        runnable: Number(r.runnable),
        due: Number(r.due),
        executing: Number(r.executing),
        headId: r.head_id,
        headPriority: r.head_priority,
        headEligibleAt: r.head_eligible_at,
        headWeight: r.head_weight,
        headAgeMs: r.head_age_ms,
      })),
  },
);

/** One (queue, fairness key) head. */
export interface FairHead {
  readonly queue: string;
  readonly key: string;
}

/** What FAIR_HEADS_LOCK_IDLE answers: the page's last head and the idle heads it locked. */
export interface FairHeadsPage {
  /** The last head of the page (the next page starts after it); null when the page was empty. */
  readonly last: FairHead | null;
  /** Heads read. */
  readonly scanned: number;
  /** Heads without a live row in their queue, locked FOR UPDATE (SKIP LOCKED). */
  readonly idle: FairHead[];
}

interface FairHeadsPageRecord {
  readonly last_queue: string | null;
  readonly last_key: string | null;
  readonly scanned: string;
  readonly idle_queues: string[] | null;
  readonly idle_keys: string[] | null;
}

/**
 * A live row of (queue, key) `f`: runnable (gen_durable_fair_pick), or executing / awaiting a
 * signal or children (gen_durable_fair_live); each a `LIMIT 1` probe of its partial index, whose
 * predicate this text repeats so the planner picks it.
 */
function liveRowOf(f: string): string {
  return `(EXISTS (SELECT 1 FROM {schema}.gen_durable x
                     WHERE x.queue = ${f}.queue AND x.fairness_key = ${f}.fairness_key
                       AND x.fairness_key IS NOT NULL AND x.status = 'runnable')
           OR EXISTS (SELECT 1 FROM {schema}.gen_durable x
                       WHERE x.queue = ${f}.queue AND x.fairness_key = ${f}.fairness_key
                         AND x.fairness_key IS NOT NULL
                         AND x.status IN ('executing', 'awaiting_signal', 'awaiting_children')))`;
}

/**
 * GC's head sweep, first statement of its transaction (docs/many-tenants.md "Fair claims by
 * key", docs/design.md §18): the page of `$3` heads after (`$1`, `$2`) in
 * gen_durable_fair_keys_pkey order (keyset), and among them the heads whose key has no live row
 * in its queue (two `LIMIT 1` probes each: gen_durable_fair_pick, gen_durable_fair_live), locked
 * FOR UPDATE SKIP LOCKED: a head a claim holds (FOR NO KEY UPDATE) or an inserter holds (the
 * trigger's FOR KEY SHARE) is skipped, so the sweep never waits and never takes a head from a
 * row being inserted. What this statement's snapshot saw is only a candidate: FAIR_HEADS_DELETE
 * checks again after the locks are held.
 */
export const FAIR_HEADS_LOCK_IDLE = sql(
  'fair_heads_lock_idle',
  `WITH page AS (
     SELECT f.queue, f.fairness_key
       FROM {schema}.gen_durable_fair_keys f
      WHERE (f.queue, f.fairness_key) > ($1::text, $2::text)
      ORDER BY f.queue, f.fairness_key
      LIMIT $3
   ), idle AS (
     SELECT f.queue, f.fairness_key
       FROM {schema}.gen_durable_fair_keys f
       JOIN page p ON p.queue = f.queue AND p.fairness_key = f.fairness_key
      WHERE NOT ${liveRowOf('f')}
      FOR UPDATE OF f SKIP LOCKED
   ), last AS (
     SELECT p.queue, p.fairness_key FROM page p
      ORDER BY p.queue DESC, p.fairness_key DESC
      LIMIT 1
   )
   SELECT (SELECT l.queue FROM last l) AS last_queue,
          (SELECT l.fairness_key FROM last l) AS last_key,
          (SELECT count(*) FROM page) AS scanned,
          (SELECT array_agg(i.queue ORDER BY i.queue, i.fairness_key) FROM idle i) AS idle_queues,
          (SELECT array_agg(i.fairness_key ORDER BY i.queue, i.fairness_key) FROM idle i) AS idle_keys`,
  {
    params: (i: { readonly after: FairHead; readonly limit: number }) => [
      i.after.queue,
      i.after.key,
      i.limit,
    ],
    decode: (rows: readonly FairHeadsPageRecord[]): FairHeadsPage => {
      const r = rows[0];
      const queues = r?.idle_queues ?? [];
      const keys = r?.idle_keys ?? [];
      return {
        last:
          r?.last_queue != null && r.last_key != null
            ? { queue: r.last_queue, key: r.last_key }
            : null,
        scanned: Number(r?.scanned ?? 0),
        idle: queues.map((queue, k) => ({ queue, key: keys[k]! })),
      };
    },
  },
);

/**
 * GC's head sweep, second statement of its transaction: deletes the heads FAIR_HEADS_LOCK_IDLE
 * locked (`$1` queues, `$2` keys, by gen_durable_fair_keys_pkey) whose key still has no live
 * row in its queue. Its snapshot is taken after those locks were granted, so every row that
 * entered the key before is seen (a live row keeps its head); a row inserted since waits in its
 * trigger for this transaction's lock on the head, finds it deleted after the commit and
 * creates it again (docs/many-tenants.md). Answers the heads deleted.
 */
export const FAIR_HEADS_DELETE = sql(
  'fair_heads_delete',
  `DELETE FROM {schema}.gen_durable_fair_keys f
     USING unnest($1::text[], $2::text[]) AS t(queue, fairness_key)
    WHERE f.queue = t.queue AND f.fairness_key = t.fairness_key
      AND NOT ${liveRowOf('f')}
   RETURNING f.queue, f.fairness_key AS key`,
  {
    params: (i: { readonly heads: readonly FairHead[] }) => [
      i.heads.map((h) => h.queue),
      i.heads.map((h) => h.key),
    ],
    decode: (rows: readonly FairHead[]): FairHead[] =>
      rows.map((r) => ({ queue: r.queue, key: r.key })),
  },
);
