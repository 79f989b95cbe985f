import type { CappedCount } from '../instance/queue-status';

/** The counts of a queue in the overview (docs/dashboard-data.md). */
export interface QueueOverviewCounts {
  /** Runnable rows, due or not. */
  readonly runnable: CappedCount;
  /** Runnable rows whose `eligible_at` is in the future (scheduled, backoff, sleep). */
  readonly scheduled: CappedCount;
  readonly executing: CappedCount;
  /** Null in a live answer (`source: 'live'`): parked rows are counted by the snapshot only. */
  readonly awaitingSignal: CappedCount | null;
  readonly awaitingChildren: CappedCount | null;
  /** Rows that ended in the minute before the snapshot; null in a live answer. */
  readonly done: CappedCount | null;
  readonly failed: CappedCount | null;
  readonly cancelled: CappedCount | null;
}

/** One minute of a queue's sparkline: rows that ended in the minute starting at `at`. */
export interface OverviewPoint {
  readonly at: Date;
  readonly done: number;
  readonly failed: number;
  readonly cancelled: number;
}

/** One queue of the overview. */
export interface QueueOverview {
  readonly queue: string;
  readonly counts: QueueOverviewCounts;
  /** `eligible_at` of the oldest due runnable row (null: none due). */
  readonly oldestRunnableAt: Date | null;
  /**
   * One point per minute of the window, oldest first, zero where no snapshot was written
   * (empty in a live answer).
   */
  readonly series: readonly OverviewPoint[];
}

/** What `engine.stats()` / `readOverview` answer (docs/design.md §30). */
export interface StatsOverview {
  /** `'snapshot'`: counts from the newest stored minute; `'live'`: no snapshot stored, counted now. */
  readonly source: 'snapshot' | 'live';
  /** The snapshot's minute, or the database's current minute for a live answer. */
  readonly at: Date;
  /** The newest snapshot is more than two minutes old (no maintenance node writes them). */
  readonly stale: boolean;
  /** The sparkline window, minutes. */
  readonly minutes: number;
  /** Queues by name. */
  readonly queues: readonly QueueOverview[];
}

/** Options of `engine.stats()` / `readOverview`. */
export interface StatsOverviewOptions {
  /** The sparkline window, 1 … 1440 minutes. Default 60. */
  readonly minutes?: number;
  /** The cap of a live count (no snapshot stored), 1 … 1 000 000. Default 10 000. */
  readonly cap?: number;
}
