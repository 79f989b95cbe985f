/** Options of `hold` (docs/operations-control.md "Hold and release"). */
export interface HoldOptions {
  /** Stored on the row (`heldReason`) and shown by `explain`, the dashboard and the CLI. At most 8 KiB. */
  reason?: string;
}

/** What `hold` / `release` answered: the instance, and whether this call changed it. */
export interface HoldResult {
  /** The instance's id. */
  readonly id: string;
  /** False: it was already held (`hold`, the reason updated when given) or not held (`release`). */
  readonly changed: boolean;
}
