/** Encodes and decodes an FSM's state to and from its stored JSON object. */
export interface StateCodec<S = unknown> {
  /** JSON object from the row → the state handed to steps. */
  load(stored: Record<string, unknown>): S;
  /** State returned by a step → a JSON object to store. */
  dump(state: S): Record<string, unknown>;
}
