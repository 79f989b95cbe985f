import type { LimiterSlot } from '../limiter/limiter.interface';
import type { ClaimRow } from '../sql/claim.sql';

/** A row this node holds under a claim, with its enrichment snapshot and its gate slot. */
export interface ClaimedRow extends ClaimRow {
  /**
   * The gate slot admission drew for this row (docs/design.md §16), credited after its outcome
   * commits or when the claim is released; absent or null for rows that hold none.
   */
  slot?: LimiterSlot | null;
  /**
   * The row was written already claimed by its insert on this node (docs/design.md §5.5.1): it
   * holds no key, limit or fairness key, so its end can unblock no other row.
   */
  insertedClaimed?: true;
}
