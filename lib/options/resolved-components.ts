/** The resolved forms of the options that the table builds with a `finish` step. */

export interface ResolvedFlusher {
  readonly queues: 'all' | readonly string[];
  readonly maxBatch: number;
  readonly maxDelayMs: number;
}

export interface ResolvedRateLimit {
  readonly name: string;
  /** tokens per second */
  readonly rate: number;
  readonly burst: number;
  readonly shards: number;
}

export interface ResolvedConcurrencyLimit {
  readonly name: string;
  readonly limit: number;
  readonly shards: number;
}
