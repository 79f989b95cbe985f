// The public shapes of `EngineService.cancelAll` / `retryAll` (docs/design.md §27.7), apart
// from the code that runs them, so the published declarations reach no database-driver types.

import type { CancelOptions } from './cancel-options';

/** Options every bulk action takes. */
export interface BulkOptions {
  /** Count the matching rows (`matched`) and change nothing. Default false. */
  dryRun?: boolean;
  /**
   * A filter with no criteria addresses every instance and is refused (`InvalidInputError`)
   * unless this is true.
   */
  all?: boolean;
}

/** Options of `cancelAll`: those of `cancel`, applied to each matching row, and the bulk ones. */
export type CancelAllOptions = CancelOptions & BulkOptions;

/** Options of `retryAll`: those of `retry` that apply to many rows at once, and the bulk ones. */
export interface RetryAllOptions extends BulkOptions {
  /**
   * The step to resume at; needs `filter.fsm`, and each named FSM's newest version must have it
   * (`UnknownStepError`). A matched row whose version lacks it is left alone. Default: each
   * row's own step.
   */
  step?: string;
  /** When the rows become due. Default: now. */
  at?: Date;
  /** Retry children whose parent moved on, unlinked (as `retry`). Default false. */
  detach?: boolean;
  /** Who asked: recorded in each retried row's `manual.retry` history row. Default: none. */
  actor?: string;
}

/** What a bulk action did: rows the filter matched, and rows it changed. */
export interface BulkResult {
  readonly matched: number;
  readonly changed: number;
}
