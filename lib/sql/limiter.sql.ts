import { noRows } from './row-decoders';
import { noParams, sql } from './statement';

// The PostgreSQL limiter (docs/design.md §14–§16.2, §18.2–18.3). Counter rows live in
// gen_durable_buckets, PK gen_durable_buckets_pkey (kind, key, shard), fenced by
// gen_durable_buckets_check (0 ≤ available ≤ capacity); policies in gen_durable_bucket_configs,
// PK (kind, name). Counter rows are locked FOR UPDATE SKIP LOCKED in (key, shard) order (R6):
// an admit never waits on a counter another admit holds, it takes the other shards.

/** One limit declaration, a row of gen_durable_bucket_configs. */
export interface BucketConfig {
  readonly kind: 'rate' | 'conc';
  readonly name: string;
  /** Tokens per second (rate limits); null for gates. */
  readonly rate: number | null;
  /** Burst (rate) or limit (gate). */
  readonly capacity: number;
  readonly shards: number;
}

/** One claimed row asking ADMIT for admission, in claim order. */
export interface AdmitEntry {
  readonly id: string;
  readonly gateKey: string | null;
  readonly rateKey: string | null;
  readonly weight: number;
}

interface AdmitRecord {
  id: string;
  admitted: boolean;
  shard: number | null;
  gate_ok: boolean;
  rate_checked: boolean;
  rate_ok: boolean;
}

/** ADMIT's answer for one entry: the verdict, the drawn shard, and the gate and rate verdicts. */
export interface AdmitVerdict {
  readonly id: string;
  readonly admitted: boolean;
  readonly shard: number | null;
  readonly gateOk: boolean;
  /** The entry reached its rate bucket (it has one and passed its gate). */
  readonly rateChecked: boolean;
  readonly rateOk: boolean;
}

/** One limit CLOSE_LIMITS closes for `ms` from now. */
export interface LimitClosureRow {
  readonly kind: 'rate' | 'conc';
  readonly key: string;
  readonly ms: number;
}

/** `n` slots returned to one gate shard (CREDIT_GATES). */
export interface GateCredit {
  readonly key: string;
  readonly shard: number;
  readonly n: number;
}

/** One page of PRUNE_RATE_BUCKETS: rows deleted and the page's last key (null: no more). */
export interface PrunedPage {
  readonly deleted: number;
  readonly lastKey: string | null;
}

/** A gate shard (LOCK_GATE_SHARDS). */
export interface GateShard {
  readonly key: string;
  readonly shard: number;
}

/** A gate shard whose counter is below the executing truth by `deficit` (READ_GATE_DEFICITS). */
export interface GateDeficit extends GateShard {
  readonly deficit: number;
}

/** A locked gate shard and the most RECONCILE_GATES may raise its counter. */
export interface GateRaise extends GateShard {
  readonly raise: number;
}

/** A gate holder the Redis limiter re-seeds (LIST_GATE_HOLDERS). */
export interface GateHolder {
  readonly id: string;
  readonly key: string;
  /** The holding claim's fencing token: with the id, its Redis holder name. */
  readonly claimSeq: string;
  readonly remainingMs: number;
}

/**
 * Seeds this node's limit declarations at boot (docs/design.md §16.1): one upsert over parallel arrays
 * `$1` kind, `$2` name, `$3` rate (tokens/s, NULL for gates), `$4` capacity (burst or limit),
 * `$5` shards, written in (kind, name) order so two booting nodes never deadlock on the PK.
 * Differing declarations last-write-win; unchanged rows are not rewritten. PK lookups.
 */
export const UPSERT_BUCKET_CONFIGS = sql(
  'upsert_bucket_configs',
  `INSERT INTO {schema}.gen_durable_bucket_configs AS c (kind, name, rate, capacity, shards)
   SELECT t.kind, t.name, t.rate, t.capacity, t.shards
     FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::int[]) AS t(kind, name, rate, capacity, shards)
    ORDER BY t.kind, t.name
   ON CONFLICT (kind, name) DO UPDATE
      SET rate = excluded.rate, capacity = excluded.capacity, shards = excluded.shards, updated_at = now()
    WHERE (c.rate, c.capacity, c.shards) IS DISTINCT FROM (excluded.rate, excluded.capacity, excluded.shards)`,
  {
    params: ({ configs }: { readonly configs: readonly BucketConfig[] }) => {
      const kinds = new Array<string>(configs.length);
      const names = new Array<string>(configs.length);
      const rates = new Array<number | null>(configs.length);
      const capacities = new Array<number>(configs.length);
      const shards = new Array<number>(configs.length);
      for (let i = 0; i < configs.length; i++) {
        const c = configs[i]!;
        kinds[i] = c.kind;
        names[i] = c.name;
        rates[i] = c.rate;
        capacities[i] = c.capacity;
        shards[i] = c.shards;
      }
      return [kinds, names, rates, capacities, shards];
    },
    decode: noRows,
  },
);

/**
 * Admission (docs/design.md §16.2), ONE statement over the batch arrays in claim order (ordinality =
 * order): `$1` ids, `$2` gate keys (NULL = not gated), `$3` rate keys (NULL = none), `$4`
 * weights. Holds only bucket locks, for the statement.
 * - Gates: gated entries ranked per key (n); the key's existing shards locked FOR UPDATE SKIP
 *   LOCKED by (key, shard) via the PK, deduplicated per shard keeping the minimum available
 *   (a locked scan may emit a concurrently updated tuple twice, §3.5); a key with NO rows is
 *   cold and gets virtual full shards from its config (shard s holds floor(limit/shards), +1
 *   for s < limit mod shards). Shards are laid out as cumulative ranges by availability; the
 *   n-th entry takes the shard whose range holds n, else it is denied. A key whose rows exist
 *   but are all locked by another admit gets nothing this pick. A shard closed by a throttle
 *   (its `last_refill` in the future, CLOSE_LIMITS, docs/design.md §16.5) is not taken: a
 *   closed key gets nothing until then.
 * - Rate (only entries past their gate): per key, the cumulative weight in order against the
 *   total of the grabbed shards, each refilled to min(shardCap, available + elapsed × shardRate)
 *   (+ the virtual full shards of a cold key): the longest fitting prefix is granted. A bucket
 *   closed by a throttle holds 0 tokens and refills from its `last_refill`, in the future.
 * - Only entries admitted by gate AND rate are debited. Gate shards subtract in place; cold
 *   gate shards are minted pre-debited, merging a racing mint through ON CONFLICT DO UPDATE
 *   (an overdraft then trips the CHECK). Grabbed rate shards are scaled by 1 − consumed/total
 *   in place, with last_refill and capacity refreshed; cold rate shards are minted pre-debited
 *   WITHOUT ON CONFLICT (merging needs the burst, a config value), so a racing mint trips the
 *   PK. Either violation aborts the statement; the caller retries (3 attempts).
 * - The drawn shard is stamped onto each admitted gated row by id (unguarded, docs/design.md §7; the
 *   claim wrote the provisional shard 0, so shard-0 draws write nothing).
 * Unknown names (no config row) are never admitted. Returns one row per entry in order with
 * the verdict, the drawn shard, and the gate and rate verdicts for telemetry.
 */
export const ADMIT = sql(
  'admit',
  `WITH e AS MATERIALIZED (
     SELECT t.id, t.ckey, t.rkey, t.w, t.ord
       FROM unnest($1::bigint[], $2::text[], $3::text[], $4::float8[]) WITH ORDINALITY AS t(id, ckey, rkey, w, ord)
   ), ge AS MATERIALIZED (
     SELECT e.ord, e.ckey, row_number() OVER (PARTITION BY e.ckey ORDER BY e.ord) AS n
       FROM e WHERE e.ckey IS NOT NULL
   ), gcfg AS MATERIALIZED (
     SELECT k.key, c.capacity::int AS lim, LEAST(GREATEST(c.shards, 1), c.capacity::int) AS shards
       FROM (SELECT DISTINCT ge.ckey AS key FROM ge) k
       JOIN {schema}.gen_durable_bucket_configs c ON c.kind = 'conc' AND c.name = split_part(k.key, ':', 1)
      WHERE c.capacity >= 1
   ), glock AS MATERIALIZED (
     SELECT b.key, b.shard, b.available
       FROM {schema}.gen_durable_buckets b
      WHERE b.kind = 'conc' AND b.key = ANY (ARRAY(SELECT gcfg.key FROM gcfg))
        AND (b.last_refill IS NULL OR b.last_refill <= now())
      ORDER BY b.key, b.shard
        FOR UPDATE SKIP LOCKED
   ), gcold AS MATERIALIZED (
     SELECT g.key, g.lim, g.shards
       FROM gcfg g
      WHERE NOT EXISTS (SELECT 1 FROM {schema}.gen_durable_buckets b WHERE b.kind = 'conc' AND b.key = g.key)
   ), gvirt AS MATERIALIZED (
     SELECT c.key, s.shard, c.lim / c.shards + CASE WHEN s.shard < c.lim % c.shards THEN 1 ELSE 0 END AS cap
       FROM gcold c CROSS JOIN LATERAL generate_series(0, c.shards - 1) AS s(shard)
   ), grange AS MATERIALIZED (
     SELECT a.key, a.shard, a.cold, a.avail,
            sum(a.avail) OVER (PARTITION BY a.key ORDER BY a.avail DESC, a.shard ROWS UNBOUNDED PRECEDING) AS hi
       FROM (SELECT l.key, l.shard, floor(min(l.available))::int AS avail, false AS cold
               FROM glock l GROUP BY l.key, l.shard
             UNION ALL
             SELECT v.key, v.shard, v.cap, true FROM gvirt v) a
      WHERE a.avail > 0
   ), gpick AS MATERIALIZED (
     SELECT ge.ord, r.shard, r.cold
       FROM ge JOIN grange r ON r.key = ge.ckey AND ge.n > r.hi - r.avail AND ge.n <= r.hi
   ), re AS MATERIALIZED (
     SELECT e.ord, e.rkey, e.w
       FROM e
      WHERE e.rkey IS NOT NULL AND (e.ckey IS NULL OR EXISTS (SELECT 1 FROM gpick p WHERE p.ord = e.ord))
   ), rcfg AS MATERIALIZED (
     SELECT k.key, GREATEST(c.shards, 1) AS shards, c.capacity / GREATEST(c.shards, 1) AS scap,
            COALESCE(c.rate, 0) / GREATEST(c.shards, 1) AS srate
       FROM (SELECT DISTINCT re.rkey AS key FROM re) k
       JOIN {schema}.gen_durable_bucket_configs c ON c.kind = 'rate' AND c.name = split_part(k.key, ':', 1)
   ), rlock AS MATERIALIZED (
     SELECT b.key, b.shard, b.available, b.last_refill
       FROM {schema}.gen_durable_buckets b
      WHERE b.kind = 'rate' AND b.key = ANY (ARRAY(SELECT rcfg.key FROM rcfg))
      ORDER BY b.key, b.shard
        FOR UPDATE SKIP LOCKED
   ), rshard AS MATERIALIZED (
     SELECT l.key, l.shard,
            min(LEAST(c.scap, l.available
                              + GREATEST(0, extract(epoch FROM now() - COALESCE(l.last_refill, now()))) * c.srate)) AS tokens
       FROM rlock l JOIN rcfg c ON c.key = l.key
      GROUP BY l.key, l.shard
   ), rcold AS MATERIALIZED (
     SELECT c.key, c.shards, c.scap
       FROM rcfg c
      WHERE NOT EXISTS (SELECT 1 FROM {schema}.gen_durable_buckets b WHERE b.kind = 'rate' AND b.key = c.key)
   ), rtotal AS MATERIALIZED (
     SELECT x.key, sum(x.tokens) AS total
       FROM (SELECT s.key, s.tokens FROM rshard s UNION ALL SELECT c.key, c.scap * c.shards FROM rcold c) x
      GROUP BY x.key
   ), rgrant AS MATERIALIZED (
     SELECT x.ord
       FROM (SELECT re.ord, re.rkey, sum(re.w) OVER (PARTITION BY re.rkey ORDER BY re.ord ROWS UNBOUNDED PRECEDING) AS cum
               FROM re) x
       JOIN rtotal t ON t.key = x.rkey
      WHERE x.cum <= t.total + 1e-9
   ), adm AS MATERIALIZED (
     SELECT e.ord, e.id, e.ckey, p.shard, e.rkey, e.w
       FROM e LEFT JOIN gpick p ON p.ord = e.ord
      WHERE (e.ckey IS NULL OR p.ord IS NOT NULL)
        AND (e.rkey IS NULL OR EXISTS (SELECT 1 FROM rgrant g WHERE g.ord = e.ord))
   ), gdebit AS MATERIALIZED (
     SELECT a.ckey AS key, a.shard, count(*)::int AS n FROM adm a WHERE a.ckey IS NOT NULL GROUP BY a.ckey, a.shard
   ), gupd AS (
     UPDATE {schema}.gen_durable_buckets b
        SET available = b.available - d.n
       FROM gdebit d
      WHERE b.kind = 'conc' AND b.key = d.key AND b.shard = d.shard
        AND NOT EXISTS (SELECT 1 FROM gcold c WHERE c.key = d.key)
     RETURNING b.key
   ), gmint AS (
     INSERT INTO {schema}.gen_durable_buckets AS b (kind, key, shard, capacity, available)
     SELECT 'conc', v.key, v.shard, v.cap, v.cap - COALESCE(d.n, 0)
       FROM gvirt v LEFT JOIN gdebit d ON d.key = v.key AND d.shard = v.shard
      WHERE EXISTS (SELECT 1 FROM gdebit x WHERE x.key = v.key)
      ORDER BY v.key, v.shard
     ON CONFLICT (kind, key, shard) DO UPDATE SET available = b.available - (excluded.capacity - excluded.available)
     RETURNING b.key
   ), rcons AS MATERIALIZED (
     SELECT a.rkey AS key, sum(a.w) AS consumed FROM adm a WHERE a.rkey IS NOT NULL GROUP BY a.rkey
   ), rupd AS (
     UPDATE {schema}.gen_durable_buckets b
        SET available = GREATEST(0, LEAST(c.scap, b.available
                                          + GREATEST(0, extract(epoch FROM now() - COALESCE(b.last_refill, now()))) * c.srate)
                                    * (1 - k.consumed / t.total)),
            capacity = c.scap, last_refill = now()
       FROM rcons k
       JOIN rtotal t ON t.key = k.key
       JOIN rcfg c ON c.key = k.key
       JOIN rshard s ON s.key = k.key
      WHERE b.kind = 'rate' AND b.key = s.key AND b.shard = s.shard
     RETURNING b.key
   ), rmint AS (
     INSERT INTO {schema}.gen_durable_buckets (kind, key, shard, capacity, available, last_refill)
     SELECT 'rate', c.key, s.shard, c.scap, GREATEST(0, c.scap * (1 - k.consumed / t.total)), now()
       FROM rcold c
       JOIN rcons k ON k.key = c.key
       JOIN rtotal t ON t.key = c.key
       CROSS JOIN LATERAL generate_series(0, c.shards - 1) AS s(shard)
      ORDER BY c.key, s.shard
     RETURNING key
   ), stamp AS (
     UPDATE {schema}.gen_durable g
        SET concurrency_shard = a.shard
       FROM adm a
      WHERE g.id = a.id AND a.ckey IS NOT NULL AND g.concurrency_shard IS DISTINCT FROM a.shard
     RETURNING g.id
   )
   SELECT e.id, (a.ord IS NOT NULL) AS admitted, a.shard,
          (p.ord IS NOT NULL) AS gate_ok,
          (r.ord IS NOT NULL) AS rate_checked,
          EXISTS (SELECT 1 FROM rgrant g WHERE g.ord = e.ord) AS rate_ok
     FROM e
     LEFT JOIN adm a ON a.ord = e.ord
     LEFT JOIN gpick p ON p.ord = e.ord
     LEFT JOIN re r ON r.ord = e.ord
    ORDER BY e.ord`,
  {
    params: ({ entries }: { readonly entries: readonly AdmitEntry[] }) => {
      const ids = new Array<string>(entries.length);
      const gateKeys = new Array<string | null>(entries.length);
      const rateKeys = new Array<string | null>(entries.length);
      const weights = new Array<number>(entries.length);
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i]!;
        ids[i] = e.id;
        gateKeys[i] = e.gateKey;
        rateKeys[i] = e.rateKey;
        weights[i] = e.weight;
      }
      return [ids, gateKeys, rateKeys, weights];
    },
    decode: (rows: readonly AdmitRecord[]): AdmitVerdict[] => {
      const out = new Array<AdmitVerdict>(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i]!;
        out[i] = {
          id: r.id,
          admitted: r.admitted,
          shard: r.shard,
          gateOk: r.gate_ok,
          rateChecked: r.rate_checked,
          rateOk: r.rate_ok,
        };
      }
      return out;
    },
  },
);

/**
 * Throttle (docs/design.md §16.5): closes each limit `$1` kind / `$2` key for `$3` ms from
 * now(), no schema change — the deadline lives in the counter rows' `last_refill`. Every
 * configured shard of the key is upserted (minted when the key is cold) in (kind, key, shard)
 * order through the PK gen_durable_buckets_pkey, plus any orphan shard beyond the configured
 * count (PK range scan); configs by their PK:
 * - rate: `available` 0 and `last_refill` = the deadline: ADMIT refills from it, so the bucket
 *   holds no token until then and reopens empty, refilling at its rate;
 * - conc: `last_refill` = the deadline, `available` kept (minted full): ADMIT takes no shard of
 *   it until then (its in-flight holders still credit their slots).
 * A later deadline already set is kept (GREATEST). Names without a config row close nothing
 * (they are never admitted anyway). Waits on row locks (an admit holds them for one
 * statement); returns the number of rows written.
 */
export const CLOSE_LIMITS = sql(
  'close_limits',
  `WITH c AS MATERIALIZED (
     SELECT t.kind, t.key, max(now() + make_interval(secs => t.ms / 1000)) AS until
       FROM unnest($1::text[], $2::text[], $3::float8[]) AS t(kind, key, ms)
      GROUP BY t.kind, t.key
   ), f AS MATERIALIZED (
     SELECT c.kind, c.key, c.until, cf.capacity,
            CASE WHEN c.kind = 'conc' THEN LEAST(GREATEST(cf.shards, 1), cf.capacity::int)
                 ELSE GREATEST(cf.shards, 1) END AS shards
       FROM c JOIN {schema}.gen_durable_bucket_configs cf ON cf.kind = c.kind AND cf.name = split_part(c.key, ':', 1)
      WHERE c.kind = 'rate' OR cf.capacity >= 1
   ), w AS MATERIALIZED (
     SELECT f.kind, f.key, s.shard, f.until,
            (CASE WHEN f.kind = 'rate' THEN f.capacity / f.shards
                  ELSE f.capacity::int / f.shards + CASE WHEN s.shard < f.capacity::int % f.shards THEN 1 ELSE 0 END
             END)::float8 AS cap
       FROM f CROSS JOIN LATERAL generate_series(0, f.shards - 1) AS s(shard)
   ), ins AS (
     INSERT INTO {schema}.gen_durable_buckets AS b (kind, key, shard, capacity, available, last_refill)
     SELECT w.kind, w.key, w.shard, w.cap, CASE WHEN w.kind = 'rate' THEN 0 ELSE w.cap END, w.until
       FROM w
      ORDER BY w.kind, w.key, w.shard
     ON CONFLICT (kind, key, shard) DO UPDATE
        SET available = CASE WHEN b.kind = 'rate' THEN 0 ELSE b.available END,
            last_refill = GREATEST(b.last_refill, excluded.last_refill)
     RETURNING b.key
   ), orphan AS (
     UPDATE {schema}.gen_durable_buckets b
        SET available = CASE WHEN b.kind = 'rate' THEN 0 ELSE b.available END,
            last_refill = GREATEST(b.last_refill, f.until)
       FROM f
      WHERE b.kind = f.kind AND b.key = f.key AND b.shard >= f.shards
     RETURNING b.key
   )
   SELECT ((SELECT count(*) FROM ins) + (SELECT count(*) FROM orphan))::int AS changed`,
  {
    params: ({ closures }: { readonly closures: readonly LimitClosureRow[] }) => [
      closures.map((c) => c.kind),
      closures.map((c) => c.key),
      closures.map((c) => c.ms),
    ],
    decode: (rows: readonly { changed: number }[]) => rows[0]?.changed ?? 0,
  },
);

/**
 * Credit (docs/design.md §6.4, §16.2): returns `$3` slots to each gate shard (`$1` key, `$2` shard,
 * pre-aggregated), capped at capacity: available = least(capacity, available + n). Locks the
 * shards in (key, shard) order (waits: a credit must land) through the PK; a shard swept by
 * GC meanwhile matches nothing (it was idle and full).
 */
export const CREDIT_GATES = sql(
  'credit_gates',
  `WITH c AS (
     SELECT t.key, t.shard, t.n FROM unnest($1::text[], $2::int[], $3::int[]) AS t(key, shard, n)
   ), l AS (
     SELECT b.key, b.shard
       FROM {schema}.gen_durable_buckets b JOIN c ON b.kind = 'conc' AND b.key = c.key AND b.shard = c.shard
      ORDER BY b.key, b.shard
        FOR UPDATE OF b
   )
   UPDATE {schema}.gen_durable_buckets b
      SET available = LEAST(b.capacity, b.available + c.n)
     FROM c JOIN l ON l.key = c.key AND l.shard = c.shard
    WHERE b.kind = 'conc' AND b.key = c.key AND b.shard = c.shard
   RETURNING b.key`,
  {
    params: ({ credits }: { readonly credits: readonly GateCredit[] }) => {
      const keys = new Array<string>(credits.length);
      const shards = new Array<number>(credits.length);
      const counts = new Array<number>(credits.length);
      for (let i = 0; i < credits.length; i++) {
        const c = credits[i]!;
        keys[i] = c.key;
        shards[i] = c.shard;
        counts[i] = c.n;
      }
      return [keys, shards, counts];
    },
    decode: noRows,
  },
);

/**
 * Bucket GC (docs/design.md §18.2), one page of rate keys after `$1` (by key; `$2` keys per page):
 * all shards of a key or none. A key goes when every one of its rows is lockable now (locked
 * here, skip-locked) and either its config row is gone, or every configured shard is present
 * and idle longer than capacity/rate seconds (refilled to full: re-minting loses nothing).
 * Rate 0 never qualifies by idleness. Returns the deleted rows' keys and the page's last key
 * (`last_key`, NULL when the page was empty). PK range scans.
 */
export const PRUNE_RATE_BUCKETS = sql(
  'prune_rate_buckets',
  `WITH page AS MATERIALIZED (
     SELECT DISTINCT b.key FROM {schema}.gen_durable_buckets b
      WHERE b.kind = 'rate' AND b.key > $1::text
      ORDER BY b.key
      LIMIT $2
   ), l AS MATERIALIZED (
     SELECT b.key, b.shard, b.last_refill, b.capacity
       FROM {schema}.gen_durable_buckets b
      WHERE b.kind = 'rate' AND b.key = ANY (ARRAY(SELECT page.key FROM page))
      ORDER BY b.key, b.shard
        FOR UPDATE SKIP LOCKED
   ), present AS MATERIALIZED (
     SELECT b.key, count(*) AS n FROM {schema}.gen_durable_buckets b
      WHERE b.kind = 'rate' AND b.key = ANY (ARRAY(SELECT page.key FROM page))
      GROUP BY b.key
   ), gone AS MATERIALIZED (
     SELECT k.key
       FROM (SELECT l.key, count(DISTINCT l.shard) AS locked, max(l.last_refill) AS last_refill,
                    max(l.capacity) AS capacity
               FROM l GROUP BY l.key) k
       JOIN present p ON p.key = k.key
       LEFT JOIN {schema}.gen_durable_bucket_configs c ON c.kind = 'rate' AND c.name = split_part(k.key, ':', 1)
      WHERE k.locked = p.n
        AND (c.name IS NULL
             OR (c.rate > 0 AND k.locked >= GREATEST(c.shards, 1)
                 AND k.last_refill < now() - make_interval(secs => c.capacity / c.rate)))
   ), del AS (
     DELETE FROM {schema}.gen_durable_buckets b
      USING gone
      WHERE b.kind = 'rate' AND b.key = gone.key
     RETURNING b.key
   )
   SELECT (SELECT count(*) FROM del)::int AS deleted, (SELECT max(page.key) FROM page) AS last_key`,
  {
    params: (i: { readonly afterKey: string; readonly pageSize: number }) => [
      i.afterKey,
      i.pageSize,
    ],
    decode: (rows: readonly { deleted: number; last_key: string | null }[]): PrunedPage => ({
      deleted: rows[0]?.deleted ?? 0,
      lastKey: rows[0]?.last_key ?? null,
    }),
  },
);

/**
 * Gate reconcile, before its transaction (docs/design.md §18.3): each gate shard whose counter is
 * below the executing truth, max(0, shardCap − holders) − available, without locking
 * anything. The reconcile raises a counter by at most the deficit it saw here a moment
 * earlier: an outcome that committed but whose credit has not landed yet looks like a leak
 * for an instant, and repairing it as well would double-credit the slot once its credit
 * lands. Executing rows through gen_durable_lease; counter rows by the PK.
 */
export const READ_GATE_DEFICITS = sql(
  'read_gate_deficits',
  `WITH h AS MATERIALIZED (
     SELECT g.concurrency_key AS key, g.concurrency_shard::int AS shard, count(*) AS n
       FROM {schema}.gen_durable g
      WHERE g.status = 'executing' AND g.concurrency_shard IS NOT NULL AND g.concurrency_key IS NOT NULL
      GROUP BY g.concurrency_key, g.concurrency_shard
   )
   SELECT b.key, b.shard, x.target - b.available AS deficit
     FROM {schema}.gen_durable_buckets b
     JOIN {schema}.gen_durable_bucket_configs c ON c.kind = 'conc' AND c.name = split_part(b.key, ':', 1) AND c.capacity >= 1
     CROSS JOIN LATERAL (SELECT c.capacity::int AS lim, LEAST(GREATEST(c.shards, 1), c.capacity::int) AS shards) k
     LEFT JOIN h ON h.key = b.key AND h.shard = b.shard
     CROSS JOIN LATERAL (
       SELECT GREATEST(0, k.lim / k.shards + CASE WHEN b.shard < k.lim % k.shards THEN 1 ELSE 0 END - COALESCE(h.n, 0)) AS target
     ) x
    WHERE b.kind = 'conc' AND b.shard < k.shards AND x.target > b.available
    ORDER BY b.key, b.shard`,
  { params: noParams, decode: (rows: readonly GateDeficit[]) => rows },
);

/**
 * Gate reconcile, step 1 of its transaction (docs/design.md §18.3): lock every gate shard that is
 * lockable now, skip-locked, in (key, shard) order (PK). The next statement reads the
 * executing truth fresh, under these locks.
 */
export const LOCK_GATE_SHARDS = sql(
  'lock_gate_shards',
  `SELECT b.key, b.shard
     FROM {schema}.gen_durable_buckets b
    WHERE b.kind = 'conc'
    ORDER BY b.key, b.shard
      FOR UPDATE SKIP LOCKED`,
  { params: noParams, decode: (rows: readonly GateShard[]) => rows },
);

/**
 * Gate reconcile, step 2 (docs/design.md §18.3), on the shards `$1` keys / `$2` shards locked by
 * LOCK_GATE_SHARDS in this transaction; `$3` = per shard the most its counter may be raised
 * (the deficit READ_GATE_DEFICITS saw before, 0 if none). Holders = executing rows of key +
 * shard, read fresh (a new snapshot after the locks; found through gen_durable_lease).
 * Per locked shard:
 * - config gone, or shard ≥ shards (orphan): deleted when it has no holders, else kept;
 * - a key with no holders at all whose rows were all locked here: deleted whole (idle: the
 *   next admit mints it cold, zero lag) — unless a throttle closed it (a shard's `last_refill`
 *   in the future, CLOSE_LIMITS): its rows carry the deadline and stay until it passed;
 * - otherwise capacity := the shard's share of the configured limit, and available moves to
 *   target = max(0, capacity − holders): lowered at once (stricter is safe), raised by at most
 *   `$3`, which repairs leaked slots without double-crediting a credit still in flight.
 * Missing in-range shards of a key that keeps rows are backfilled full (less holders), ON
 * CONFLICT DO NOTHING, so "no rows ⇒ cold" stays all-or-nothing after a `shards` increase.
 * Provisional shard-0 rows (claimed, not yet admitted) count as holders: drift toward strict.
 * Returns the number of rows changed.
 */
export const RECONCILE_GATES = sql(
  'reconcile_gates',
  `WITH l AS MATERIALIZED (
     SELECT t.key, t.shard, t.raise FROM unnest($1::text[], $2::int[], $3::float8[]) AS t(key, shard, raise)
   ), h AS MATERIALIZED (
     SELECT g.concurrency_key AS key, g.concurrency_shard::int AS shard, count(*) AS n
       FROM {schema}.gen_durable g
      WHERE g.status = 'executing' AND g.concurrency_shard IS NOT NULL
        AND g.concurrency_key = ANY (ARRAY(SELECT DISTINCT l.key FROM l))
      GROUP BY g.concurrency_key, g.concurrency_shard
   ), keys AS MATERIALIZED (
     SELECT k.key, c.capacity::int AS lim, LEAST(GREATEST(c.shards, 1), c.capacity::int) AS shards,
            (SELECT count(*) FROM l WHERE l.key = k.key) AS locked,
            (SELECT count(*) FROM {schema}.gen_durable_buckets b WHERE b.kind = 'conc' AND b.key = k.key) AS present,
            COALESCE((SELECT sum(h.n) FROM h WHERE h.key = k.key), 0) AS holders,
            EXISTS (SELECT 1 FROM {schema}.gen_durable_buckets b
                     WHERE b.kind = 'conc' AND b.key = k.key AND b.last_refill > now()) AS closed
       FROM (SELECT DISTINCT l.key FROM l) k
       LEFT JOIN {schema}.gen_durable_bucket_configs c ON c.kind = 'conc' AND c.name = split_part(k.key, ':', 1)
                                                   AND c.capacity >= 1
   ), d AS MATERIALIZED (
     SELECT l.key, l.shard, l.raise, COALESCE(h.n, 0) AS holders,
            CASE WHEN k.lim IS NULL OR l.shard >= k.shards THEN
                   CASE WHEN COALESCE(h.n, 0) = 0 THEN 'delete' ELSE 'keep' END
                 WHEN k.holders = 0 AND k.locked = k.present AND NOT k.closed THEN 'delete'
                 ELSE 'fix' END AS action,
            c.cap, GREATEST(0, c.cap - COALESCE(h.n, 0))::float8 AS target
       FROM l JOIN keys k ON k.key = l.key LEFT JOIN h ON h.key = l.key AND h.shard = l.shard
       CROSS JOIN LATERAL (
         SELECT CASE WHEN k.lim IS NOT NULL
                     THEN k.lim / k.shards + CASE WHEN l.shard < k.lim % k.shards THEN 1 ELSE 0 END END AS cap
       ) c
   ), fix AS (
     UPDATE {schema}.gen_durable_buckets b
        SET capacity = d.cap,
            available = CASE WHEN d.target <= b.available THEN d.target ELSE LEAST(d.target, b.available + d.raise) END
       FROM d
      WHERE d.action = 'fix' AND b.kind = 'conc' AND b.key = d.key AND b.shard = d.shard
        AND (b.capacity, b.available) IS DISTINCT FROM
            (d.cap::float8, CASE WHEN d.target <= b.available THEN d.target ELSE LEAST(d.target, b.available + d.raise) END)
     RETURNING b.key
   ), del AS (
     DELETE FROM {schema}.gen_durable_buckets b
      USING d
      WHERE d.action = 'delete' AND b.kind = 'conc' AND b.key = d.key AND b.shard = d.shard
     RETURNING b.key
   ), fill AS (
     INSERT INTO {schema}.gen_durable_buckets (kind, key, shard, capacity, available)
     SELECT 'conc', k.key, s.shard, x.cap, GREATEST(0, x.cap - COALESCE(h.n, 0))
       FROM keys k
       CROSS JOIN LATERAL generate_series(0, k.shards - 1) AS s(shard)
       CROSS JOIN LATERAL (SELECT k.lim / k.shards + CASE WHEN s.shard < k.lim % k.shards THEN 1 ELSE 0 END AS cap) x
       LEFT JOIN h ON h.key = k.key AND h.shard = s.shard
      WHERE k.lim IS NOT NULL
        AND NOT (k.holders = 0 AND k.locked = k.present AND NOT k.closed)
        AND NOT EXISTS (SELECT 1 FROM {schema}.gen_durable_buckets b WHERE b.kind = 'conc' AND b.key = k.key AND b.shard = s.shard)
      ORDER BY k.key, s.shard
     ON CONFLICT (kind, key, shard) DO NOTHING
     RETURNING key
   )
   SELECT ((SELECT count(*) FROM fix) + (SELECT count(*) FROM del) + (SELECT count(*) FROM fill))::int AS changed`,
  {
    params: ({ shards }: { readonly shards: readonly GateRaise[] }) => {
      const keys = new Array<string>(shards.length);
      const numbers = new Array<number>(shards.length);
      const raises = new Array<number>(shards.length);
      for (let i = 0; i < shards.length; i++) {
        const s = shards[i]!;
        keys[i] = s.key;
        numbers[i] = s.shard;
        raises[i] = s.raise;
      }
      return [keys, numbers, raises];
    },
    decode: (rows: readonly { changed: number }[]) => rows[0]?.changed ?? 0,
  },
);

/**
 * Redis limiter (docs/design.md §16.3, §26.9): marks the gated rows `$1` that Redis just admitted with
 * shard 1. Redis ignores shards; the mark tells an admitted holder apart from a row that is
 * merely claimed (provisional shard 0), so a re-seed after Redis lost its data re-adds real
 * holders only. Unguarded like the PG stamp (the caller holds the claims). PK lookups.
 */
export const MARK_REDIS_ADMITTED = sql(
  'mark_redis_admitted',
  `UPDATE {schema}.gen_durable
      SET concurrency_shard = 1
    WHERE id = ANY ($1::bigint[]) AND status = 'executing' AND concurrency_shard = 0
   RETURNING id`,
  { params: (i: { readonly ids: readonly string[] }) => [i.ids], decode: noRows },
);

/**
 * Redis limiter recovery (docs/design.md §26.9): the gate holders Postgres knows, i.e. executing rows
 * the Redis limiter admitted (MARK_REDIS_ADMITTED), with their remaining lease in ms, so an
 * emptied Redis can be re-seeded before it admits again. Scans the executing set through
 * gen_durable_lease.
 */
export const LIST_GATE_HOLDERS = sql(
  'list_gate_holders',
  `SELECT g.id, g.concurrency_key AS key, g.claim_seq,
          GREATEST(0, extract(epoch FROM g.lease_expires_at - now()) * 1000)::float8 AS remaining_ms
     FROM {schema}.gen_durable g
    WHERE g.status = 'executing' AND g.lease_expires_at IS NOT NULL
      AND g.concurrency_key IS NOT NULL AND g.concurrency_shard = 1
    ORDER BY g.id`,
  {
    params: noParams,
    decode: (
      rows: readonly { id: string; key: string; claim_seq: string; remaining_ms: number }[],
    ): GateHolder[] => {
      const out = new Array<GateHolder>(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i]!;
        out[i] = { id: r.id, key: r.key, claimSeq: r.claim_seq, remainingMs: r.remaining_ms };
      }
      return out;
    },
  },
);

/** The database name: part of the Redis limiter's seed marker, so two databases sharing one Redis each re-seed their own holders. */
export const CURRENT_DATABASE = sql('current_database', `SELECT current_database() AS name`, {
  params: noParams,
  decode: (rows: readonly { name: string }[]) => rows[0]?.name ?? '',
});
