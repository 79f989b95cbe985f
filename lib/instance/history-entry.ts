// The public shapes of step history (docs/design.md §28.1), apart from the code that writes and
// reads it, so the published declarations of the API reach no database-driver types.

/**
 * How much history an FSM records (`@DurableFsm({ history })`, docs/design.md §28.1):
 * - `'off'`: nothing;
 * - `'failures'` (default): thrown errors, retries, stops, reaps, poison-pill verdicts, cancels
 *   and manual actions;
 * - `'transitions'`: every committed outcome as well (no state);
 * - `'full'`: every committed outcome with the state it committed.
 */
export type HistoryLevel = 'off' | 'failures' | 'transitions' | 'full';

/** Every history level, least to most. */
export const HISTORY_LEVELS: readonly HistoryLevel[] = ['off', 'failures', 'transitions', 'full'];

/**
 * What a history row records (docs/operations-control.md "Step history"):
 * - a committed outcome of a step: `next`, `retry`, `throttle`, `await`, `sleep`, `scheduleChildren`,
 *   `done`, `stop` (a thrown error routed to a retry or a stop carries `error`);
 * - `cancelled`: the engine ended the row `cancelled` — the owner's flush honoured a cancel
 *   request, or the reaper took back a row whose cancel was requested;
 * - `reaped`: the reaper took back an expired lease and made the row runnable again;
 * - `poisoned`: the reaper's poison-pill verdict (the row was reaped too often) failed it;
 * - `manual.cancel`, `manual.retry`: an operator's `cancel` / `retry`, with its `actor`;
 * - `manual.hold`, `manual.release`: an operator's `hold` / `release` (outcome `held` /
 *   `released`), with its `actor`, and its `reason` as `error` `{ name: 'reason', message }`;
 * - `manual.fork`: the first row of an instance made by `fork` (docs/design.md §28.3), with its
 *   `actor`; `outcome` names the source (`forked from #<id>`);
 * - `deadline`: the instance deadline moved the row to its FSM's `onDeadline` step
 *   (`nextStep`; docs/operations-control.md "Instance deadlines"). A deadline that cancels
 *   records `manual.cancel` with the actor `deadline`.
 */
export type HistoryKind =
  | 'next'
  | 'retry'
  | 'throttle'
  | 'await'
  | 'sleep'
  | 'scheduleChildren'
  | 'done'
  | 'stop'
  | 'cancelled'
  | 'reaped'
  | 'poisoned'
  | 'manual.cancel'
  | 'manual.retry'
  | 'manual.fork'
  | 'manual.hold'
  | 'manual.release'
  | 'deadline';

/** A thrown error as history keeps it: class name, message and stack (at most 8 KiB of text). */
export interface HistoryError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | null;
}

/** One row of an instance's history, as `EngineService.history` answers it. */
export interface HistoryEntry {
  /** The row's id (a bigint as text): history of one instance is ordered by it. */
  readonly id: string;
  readonly instanceId: string;
  /** When it was written (the committing transaction's time). */
  readonly at: Date;
  readonly kind: HistoryKind;
  /** The step that ran (or the row's step for reaps and manual actions). */
  readonly step: string | null;
  /** The step the row moved to, when the outcome or action set one. */
  readonly nextStep: string | null;
  /** The attempt of the step that ran. */
  readonly attempt: number | null;
  /** The claim the outcome was committed under (a bigint as text). */
  readonly claimSeq: string | null;
  /** The node that committed it (for a manual action: none). */
  readonly worker: string | null;
  /** The status the row was left in (`requested` for a cooperative cancel still pending). */
  readonly outcome: string | null;
  /** The thrown error, when a step threw. */
  readonly error: HistoryError | null;
  /** The committed state, at level `'full'` only. */
  readonly state: unknown;
  /** Who asked for a manual action (`CancelOptions.actor`, `RetryOptions.actor`). */
  readonly actor: string | null;
}

/** Options of `EngineService.history`. */
export interface HistoryPage {
  /** At most this many rows, newest first: 1 … 1 000. Default 100. */
  limit?: number;
  /** Only rows older than this history id (the last `id` of the previous page). */
  before?: string | bigint;
}
