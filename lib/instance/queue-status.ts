/**
 * The public shapes of queue control (docs/design.md §27.6): a stored pause, the answers of
 * `pauseQueue` / `resumeQueue`, and one queue of `queueStatus`.
 */

/** A count that stopped at its cap: `capped: true` means the true number is at least `count`. */
export interface CappedCount {
  readonly count: number;
  readonly capped: boolean;
}

/** A queue's stored pause: why, and since when (database clock). */
export interface QueuePause {
  readonly queue: string;
  readonly reason: string | null;
  readonly pausedAt: Date;
}

/** What `pauseQueue` answers. */
export interface PauseQueueResult extends QueuePause {
  /** False when the queue was already paused: its `pausedAt` is the first pause's, its reason replaced if one was given. */
  readonly created: boolean;
  /** This node runs the queue or a registered FSM declares it; false may be a typo (the pause is stored anyway). */
  readonly known: boolean;
}

/** What `resumeQueue` answers. */
export interface ResumeQueueResult {
  readonly queue: string;
  /** False when the queue was not paused (nothing changed). */
  readonly wasPaused: boolean;
  /** As in {@link PauseQueueResult.known}. */
  readonly known: boolean;
}

/** One queue of `queueStatus`: its pause and its capped counts. */
export interface QueueStatus {
  readonly queue: string;
  readonly paused: boolean;
  readonly reason: string | null;
  readonly pausedAt: Date | null;
  /** This node runs a scheduler for the queue. */
  readonly served: boolean;
  /** Runnable rows, due or not. */
  readonly runnable: CappedCount;
  /** Runnable rows due now. */
  readonly due: CappedCount;
  /** Rows whose step runs now (on any node). */
  readonly executing: CappedCount;
}

/**
 * One queue's due backlog: the age of its pick-order head (null: none due), its capped depth
 * and whether it is paused (docs/design.md §27.6): `queueBacklog()` and the health check.
 */
export interface QueueBacklog {
  readonly queue: string;
  readonly headAgeMs: number | null;
  readonly depth: number;
  readonly paused: boolean;
}
