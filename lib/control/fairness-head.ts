import type { CappedCount } from '../instance/queue-status';

/**
 * The row of a fairness key that the fair claim serves next (docs/many-tenants.md "Seeing the
 * heads"): its first due, unheld runnable row in the claim's order (priority, then eligible_at).
 */
export interface FairnessNextRow {
  readonly id: string;
  readonly priority: number;
  /** Since when it is due: its age is now − eligibleAt. */
  readonly eligibleAt: Date;
  /** How long it has been due, ms, by the database clock. */
  readonly ageMs: number;
  /** Its `fairnessWeight`: the share the key is served at while this row is its head. */
  readonly weight: number;
}

/** One fairness key with work in a fair queue (`fairnessHeads`). */
export interface FairnessHead {
  /** The fairness key. */
  readonly key: string;
  /**
   * Its virtual time: the rows it was served, each counted 1 / its weight, from where it
   * joined the round. The claim serves the smallest first; compare within one queue.
   */
  readonly vtime: number;
  /** Its runnable rows, due or not, held ones included (counted up to the cap). */
  readonly runnable: CappedCount;
  /** Its runnable rows due now and not held: what a claim may take (counted up to the cap). */
  readonly due: CappedCount;
  /** Its rows whose step runs now, on any node (counted up to the cap). */
  readonly executing: CappedCount;
  /** The row a claim serves next, or null when none is due. */
  readonly next: FairnessNextRow | null;
}

/** One fair queue of `fairnessHeads`: its heads in the claim's order. */
export interface FairQueueHeads {
  readonly queue: string;
  /** How many keys have a head in the queue (counted up to the cap). */
  readonly keys: CappedCount;
  /** The first `limit` heads, smallest virtual time first: the order the claim serves them. */
  readonly heads: readonly FairnessHead[];
}

/** Options of `fairnessHeads`. */
export interface FairnessHeadsOptions {
  /** Only this queue. Default: every queue with a fairness head (at most 100). */
  readonly queue?: string;
  /** At most this many heads per queue, 1 … 1 000. Default `100`. */
  readonly limit?: number;
  /** Each count stops at this, 1 … 100 000 (`capped: true`). Default `1 000`. */
  readonly cap?: number;
}
