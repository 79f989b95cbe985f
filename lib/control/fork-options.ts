// The public shape of `EngineService.fork` (docs/design.md §28.3), apart from the code that
// runs it, so the published declarations of the API reach no database-driver types.

/** Options of `EngineService.fork` (docs/design.md §28.3). */
export interface ForkOptions<S = Record<string, unknown>> {
  /**
   * The step the fork starts at; it must exist in the fork's FSM version (`UnknownStepError`).
   * Default: the step recorded in the `fromHistory` row, else the source's current step.
   */
  step?: string;
  /**
   * The fork's state, or a function of the source's current state (decoded by the FSM's codec)
   * returning it; input policies as for inserts. Default: the source's state. Not with
   * `fromHistory`.
   */
  state?: S | ((current: S) => S);
  /**
   * Start from the state recorded in this history row of the source (`engine.history(source)`
   * ids; the FSM's history level must be `'full'` for a row to carry state).
   */
  fromHistory?: string | bigint;
  /**
   * `'latest'` (default): the newest registered version of the source's FSM; `'same'`: the
   * source's version, which this node must register.
   */
  version?: 'latest' | 'same';
  /**
   * Who forked (at most 200 characters), recorded in the fork's `manual.fork` history row
   * (FSMs whose history level is not `'off'`). Default: none.
   */
  actor?: string;
  /**
   * Insert the fork held (docs/operations-control.md "Hold and release"): no node claims it
   * until `release`, so it can be inspected first. Default false.
   */
  held?: boolean;
}
