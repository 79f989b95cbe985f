// The public shapes of `purge` / `purgeAll` (docs/design.md §27.8), apart from the code that
// runs them, so the published declarations reach no database-driver types.

import type { BulkOptions } from './bulk-options';

/** Options of `purge` (docs/design.md §27.8). */
export interface PurgeOptions {
  /**
   * Who asks (a user name, a service): named by the `instance:purged` event (the instance's
   * history goes with it). At most 200 characters. Default: none.
   */
  actor?: string;
}

/** Options of `purgeAll`: the bulk ones, the batch size and the actor. */
export interface PurgeAllOptions extends BulkOptions, PurgeOptions {
  /** Rows deleted per statement, 1 … 1 000. Default 1 000. */
  batchSize?: number;
}

/** What `purgeAll` did: ended rows the filter matched, and rows it deleted (0 on a dry run). */
export interface PurgeAllResult {
  /** Ended rows the filter matched (a child of a live parent among them is kept). */
  readonly matched: number;
  /** Rows this call deleted; 0 on a dry run. */
  readonly purged: number;
}
