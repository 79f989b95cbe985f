/** What `engine.limiterStatus()` answers (docs/design.md §30; docs/dashboard-data.md). */

/** One gate key: its slots summed over its shards. */
export interface GateStatus {
  /** The configured gate (the key's part before the first `:`). */
  readonly name: string;
  readonly key: string;
  readonly shards: number;
  /** Slots in use by the counters (limit − free). */
  readonly holders: number;
  readonly limit: number;
}

/** One rate-limit key: its tokens summed over its shards. */
export interface RateBucketStatus {
  readonly name: string;
  readonly key: string;
  readonly shards: number;
  /** Tokens available now (refilled to the database clock). */
  readonly available: number;
  readonly capacity: number;
  /** Tokens per second refilled (all shards), null when its limit is no longer configured. */
  readonly refillPerSecond: number | null;
}

/** A configured limit (a row of gen_durable_bucket_configs). */
export interface LimitDeclaration {
  readonly kind: 'gate' | 'rate';
  readonly name: string;
  /** Gate: its limit; rate: its burst. */
  readonly capacity: number;
  /** Rate: tokens per second; gate: null. */
  readonly perSecond: number | null;
  readonly shards: number;
}

export interface LimiterStatus {
  /** Where the counters live: `'redis'`: gates and buckets are read from Redis (one shard each). */
  readonly backend: 'postgres' | 'redis';
  readonly declarations: readonly LimitDeclaration[];
  /** Keys with counters; a key never used since its counters were pruned is absent (all free). */
  readonly gates: readonly GateStatus[];
  readonly buckets: readonly RateBucketStatus[];
  /** The counter scan stopped at its cap: more keys exist. */
  readonly truncated: boolean;
  /** Redis could not be read (down, not connected): why; `gates` and `buckets` are then empty. */
  readonly unreadable?: string;
}
