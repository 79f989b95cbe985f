/** Options of `hold` (docs/operations-control.md "Hold and release"). */
export interface HoldOptions {
  /** Stored on the row (`heldReason`) and shown by `explain`, the dashboard and the CLI. At most 8 KiB. */
  reason?: string;
  /**
   * Who asks (a user name, a service): stored as the `actor` of the hold's `manual.hold`
   * history row (docs/design.md §28.1), unless its FSM's `history` is `'off'`. At most 200
   * characters. Default: none.
   */
  actor?: string;
}

/** Options of `release` (docs/operations-control.md "Hold and release"). */
export interface ReleaseOptions {
  /** Recorded in the release's `manual.release` history row (not stored on the row). At most 8 KiB. */
  reason?: string;
  /** Who asks: the `actor` of the `manual.release` history row. At most 200 characters. */
  actor?: string;
}

/** What `hold` / `release` answered: the instance, and whether this call changed it. */
export interface HoldResult {
  /** The instance's id. */
  readonly id: string;
  /** False: it was already held (`hold`, the reason updated when given) or not held (`release`). */
  readonly changed: boolean;
}
