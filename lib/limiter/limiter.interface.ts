/**
 * The limiter port (docs/design.md §16.1): gates (concurrency limits) and token buckets (rate limits)
 * behind one contract with two backends, PostgreSQL (default, §16.2) and Redis (§16.3).
 * K = 1 concurrency keys are never the limiter's business: the claim's arbiter settles them.
 */

/** One claimed row asking for admission. */
export interface LimiterEntry {
  readonly id: string;
  /** The gate key when the row is gated (its concurrency name is a configured gate), else null. */
  readonly gateKey: string | null;
  /** The rate-limit key of the row's step, else null. */
  readonly rateKey: string | null;
  /** Tokens the step takes (> 0). */
  readonly weight: number;
  /**
   * The claim's holder name on the Redis limiter's gates: the row id and the claim's
   * `claim_seq` (`id:seq`, {@link gateHolder}), so that a late credit of the row's previous
   * claim cannot remove the holder of its next one (docs/design.md §16.3). Absent = the id.
   */
  readonly holder?: string;
}

/**
 * A held gate slot: the gate key, the shard it was drawn from (PostgreSQL; always 1 on Redis,
 * which ignores shards and uses the stamp as its admitted mark) and the holder's id (Redis
 * sorted-set member).
 */
export interface LimiterSlot {
  readonly key: string;
  readonly shard: number;
  readonly id: string;
  /**
   * The Redis sorted-set member this slot is (the entry's `holder`); absent when the slot was
   * rebuilt from a row (a fenced cancel), whose credit then removes any holder of that row.
   */
  readonly holder?: string;
}

/** The Redis gate holder name of one claim: row id and claim_seq (docs/design.md §16.3). */
export function gateHolder(id: string, claimSeq: string): string {
  return `${id}:${claimSeq}`;
}

/** Per-key counts of one admit, for `concurrency:throttled` and `rate_limit:throttled`. */
export interface ThrottleReport {
  readonly kind: 'conc' | 'rate';
  readonly key: string;
  /** Entries that asked this gate (or reached this bucket past their gate). */
  readonly wanted: number;
  /** Entries this gate admitted (or this bucket granted). */
  readonly granted: number;
}

export interface AdmitResult {
  /** Admitted entries in claim order; `slot` is null for rate-only entries. */
  readonly admitted: readonly { readonly id: string; readonly slot: LimiterSlot | null }[];
  /** Denied entry ids in claim order. */
  readonly denied: readonly string[];
  /** Keys that admitted fewer than asked. */
  readonly throttled: readonly ThrottleReport[];
}

/** A limit declaration as seeded at boot (one row of gen_durable_bucket_configs). */
export interface LimitConfig {
  readonly kind: 'rate' | 'conc';
  readonly name: string;
  /** Tokens per second for rate limits; null for gates. */
  readonly rate: number | null;
  /** Burst (rate) or limit (gate). */
  readonly capacity: number;
  readonly shards: number;
}

/**
 * A limit a `throttle` closes (docs/design.md §16.5): the rate bucket (`rate`) or the gate
 * (`conc`) of `key`, for `ms` from now (database clock on PostgreSQL, Redis `TIME` on Redis).
 */
export interface LimitClosure {
  readonly kind: 'rate' | 'conc';
  readonly key: string;
  readonly ms: number;
}

/** What one reconcile changed (docs/design.md §18.2–18.3): rate buckets deleted, gate rows changed. */
export interface ReconcileResult {
  readonly buckets: number;
  readonly gates: number;
}

export interface Limiter {
  /**
   * Admits `entries` in claim order ((priority, eligible_at) order), honouring it: a gate's
   * n-th entry takes its n-th free slot; a bucket grants the longest prefix whose cumulative
   * weight fits. Debits only entries admitted by gate and rate. `queue` labels telemetry.
   */
  admit(entries: readonly LimiterEntry[], queue: string): Promise<AdmitResult>;
  /** Returns slots after their outcome committed (or their claim was released). Best-effort. */
  credit(slots: readonly LimiterSlot[]): Promise<void>;
  /** Keeps held slots alive (every heartbeat). */
  renew(slots: readonly LimiterSlot[]): Promise<void>;
  /**
   * Closes each limit cluster-wide until `ms` from now (docs/design.md §16.5): no admit of any
   * node grants it a row before then; a later deadline already set is kept. Best-effort like
   * `credit`: a failure is logged, the throttled rows wait out their own delay regardless.
   */
  throttle(closures: readonly LimitClosure[]): Promise<void>;
  /** Seeds this node's declarations at boot, sorted by (kind, name). */
  syncConfig(configs: readonly LimitConfig[]): Promise<void>;
  /** GC: prunes idle rate buckets and reconciles gate counters from the executing rows. */
  reconcile(): Promise<ReconcileResult>;
  close(): Promise<void>;
}
