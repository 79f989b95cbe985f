// The public shapes of `EngineService.cancel` (docs/design.md §27.2), apart from the code that
// runs it, so the published declarations of the API reach no database-driver types.

/** How a cancel treats the target's children (docs/design.md §27.2). */
export type CancelChildren = 'cascade' | 'detach' | 'keep';

/** How `cancel` treats an executing row (docs/design.md §27.2). */
export type CancelMode = 'cooperative' | 'fence';

/** Options of `EngineService.cancel` (docs/design.md §27.2). */
export interface CancelOptions {
  /** Stored on the row (`cancelReason`) and answered by `await`. Default: none. At most 8 KiB. */
  reason?: string;
  /**
   * Live children: `cascade` (default) cancels every live descendant, `detach` unlinks the
   * target's live children (`parentId` null), `keep` leaves them.
   */
  children?: CancelChildren;
  /**
   * An executing row: `cooperative` (default) asks its owner, whose flush ends it `cancelled`
   * (a terminal outcome that commits first wins); `fence` cancels it at once and fences its
   * claim, so its step's late outcome is stale — the step may still be running.
   */
  mode?: CancelMode;
  /**
   * Who asks (a user name, a service): stored as the `actor` of the cancel's history rows
   * (docs/design.md §28.1), one per row cancelled or asked to stop, unless its FSM's `history`
   * is `'off'`. At most 200 characters. Default: none.
   */
  actor?: string;
}

/** What `cancel` did: ids cancelled now, ids whose owner was asked, ids already ended. */
export interface CancelResult {
  readonly cancelled: string[];
  readonly requested: string[];
  readonly alreadyTerminal: string[];
}
