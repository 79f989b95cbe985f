/** Configuration of a forked chaos worker (worker-main.ts). */
export interface WorkerConfig {
  /** w1, w2, …: node id, application_name prefix and ledger identity. */
  readonly name: string;
  /** Through this worker's fault proxy. */
  readonly databaseUrl: string;
  /** Straight to the server (ledgers must not share the engine's faults). */
  readonly ledgerUrl: string;
  readonly redisUrl: string | null;
  readonly concurrency: number;
  readonly childConcurrency: number;
  /** Concurrency of queue `tx` (chaos_tx's transactional steps, each holding a connection). */
  readonly txConcurrency: number;
  readonly reaper: boolean;
  readonly gc: boolean;
  readonly gcRetentionMs: number;
  readonly statementTimeoutMs: number;
  /** pg pool connectionTimeoutMillis (0 = the pg default: none). */
  readonly connectTimeoutMs: number;
}

/** What the sender inserts over its feed window (docs/reliability.md §3.5 workload). */
export interface Workload {
  readonly linear: number;
  readonly keyed: number;
  readonly hotKeys: number;
  readonly retrier: number;
  readonly parker: number;
  readonly fanout: number;
  readonly tree: number;
  readonly spinner: number;
  readonly pill: number;
  /** chaos_tx instances: three transactional steps each (docs/transactional-steps.md). */
  readonly transactional: number;
  /** Share of parker signals sent twice with the same dedup key (S22). */
  readonly duplicateShare: number;
  /** Signals of a name nobody awaits, sent to finished parkers (S25: must be refused). */
  readonly lateSignals: number;
  /** Instances whose first step stops them (`failed`); each is retried with a fixed state. */
  readonly failer: number;
  /**
   * Share of the linear, keyed, retrier and parker instances cancelled at a random time after
   * their insert was acknowledged (linear ones get a 100–400 ms pause per step, so a cancel
   * finds many of them executing). Fan-outs and trees: `treeCancelShare`, always `cascade`.
   */
  readonly cancelShare: number;
  readonly treeCancelShare: number;
  /** Share of the cancels sent with `mode: 'fence'` (the others are cooperative). */
  readonly fenceShare: number;
  /** Share of the cancelled instances retried afterwards (those that ended `cancelled`). */
  readonly retryShare: number;
  /** A cancel comes U(0, cancelDelayMs) after the insert was acknowledged. */
  readonly cancelDelayMs: number;
}

export interface SenderConfig {
  readonly databaseUrl: string;
  readonly redisUrl: string | null;
  readonly seed: number;
  /** `control` or `chaos`: names its inserts' correlation keys apart from the other phase's. */
  readonly tag: string;
  readonly feedMs: number;
  readonly workload: Workload;
}

export type ChildMessage =
  | { type: 'ready'; pid: number; workers?: string[] }
  | { type: 'fatal'; error: string }
  | { type: 'fed'; inserts: number; signals: number; cancels: number; retries: number };
