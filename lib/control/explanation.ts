/**
 * The answer of `engine.explain(target)`: "why isn't it running?" (docs/design.md §30;
 * docs/dashboard-data.md lists every code).
 */

/** A reason's machine code. */
export type ExplainCode =
  | 'terminal'
  | 'executing'
  | 'lease_expired'
  | 'cancel_requested'
  | 'held'
  | 'deadline'
  | 'not_yet_eligible'
  | 'awaiting_signal'
  | 'awaiting_children'
  | 'concurrency_key_held'
  | 'gate_full'
  | 'rate_limited'
  | 'limiter_unknown'
  | 'queue_paused'
  | 'fsm_not_registered'
  | 'queue_not_served'
  | 'queued';

/** Detail values of a reason: JSON-friendly scalars, lists of names and instants. */
export type ExplainDetail = string | number | boolean | null | Date | readonly string[];

/** One reason the instance is where it is. */
export interface ExplainReason {
  readonly code: ExplainCode;
  /** One sentence for a person. */
  readonly text: string;
  /** True when this reason alone keeps the instance from running now. */
  readonly blocking: boolean;
  /** The facts the text is made of (names, ids, counts, instants), by name. */
  readonly details: Readonly<Record<string, ExplainDetail>>;
}

/** `engine.explain(target)`: the row's position and every reason that applies, blocking first. */
export interface Explanation {
  readonly id: string;
  readonly fsm: string;
  readonly version: number;
  readonly status: string;
  readonly step: string;
  readonly queue: string;
  /** The database clock when it was read. */
  readonly at: Date;
  readonly reasons: readonly ExplainReason[];
}
