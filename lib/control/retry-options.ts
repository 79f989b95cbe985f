// The public shape of `EngineService.retry` (docs/design.md §27.3), apart from the code that runs
// it, so the published declarations of the API reach no database-driver types.

/** Options of `EngineService.retry` (docs/design.md §27.3). */
export interface RetryOptions<S = Record<string, unknown>> {
  /** The step to resume at (must exist in the FSM: `UnknownStepError`). Default: the row's own. */
  step?: string;
  /**
   * The new state, or a function of the current one (decoded by the FSM's codec) returning
   * it; input policies as for inserts. Default: the row's own state.
   */
  state?: S | ((current: S) => S);
  /** When it becomes due. Default: now. */
  at?: Date;
  /**
   * A child whose parent no longer awaits its children is refused (`InvalidInputError`);
   * `detach: true` unlinks it from that parent and retries it. Default false.
   */
  detach?: boolean;
  /**
   * Who asks (a user name, a service): stored as the `actor` of the retry's history row
   * (docs/design.md §28.1), unless the FSM's `history` is `'off'`. At most 200 characters.
   * Default: none.
   */
  actor?: string;
}
