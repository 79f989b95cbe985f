import type { OnHeadFailure } from '../fsm/sequence-policy';

/** A validated, serialized row ready for INSERT_INSTANCE or a batch (`insertInstances`). */
export interface InsertRow {
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly stateText: string;
  readonly queue: string;
  readonly priority: number;
  /** Absolute start, or null for now() + delayMs. */
  readonly at: Date | null;
  readonly delayMs: number;
  readonly correlationKey: string | null;
  /** Comma-joined scope statuses. */
  readonly scope: string;
  readonly concurrencyKey: string | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  /**
   * The W3C trace context of the inserting code (`traceparent`, then a space and `tracestate`
   * when present), stored in `gen_durable.trace_context` (docs/design.md §31); absent = none.
   */
  readonly traceContext?: string | null;
  /** Inserted held (`insert({ held: true })`, docs/operations-control.md "Hold and release"). */
  readonly held?: boolean;
  /** The key's dedup window from the insert, ms (docs/identity.md "Dedup windows"); absent = none. */
  readonly dedupWindowMs?: number | null;
  /**
   * The instance deadline (docs/operations-control.md "Instance deadlines"): an absolute time
   * (`deadlineAt`), else `deadlineInMs` from the insert on the database clock; both absent = none.
   */
  readonly deadlineAt?: Date | null;
  readonly deadlineInMs?: number | null;
  /** The fairness key (docs/many-tenants.md "Fair claims by key"); absent = none. */
  readonly fairnessKey?: string | null;
  /** Its weight, integer ≥ 1; absent = 1. */
  readonly fairnessWeight?: number;
  /** The sequence key (docs/sequences.md); absent = none. */
  readonly sequenceKey?: string | null;
  /** With a sequence key: its failure policy. */
  readonly onHeadFailure?: OnHeadFailure | null;
}

/** `row` carrying `traceContext` (docs/design.md §31); `row` itself when there is none. */
export function withTraceContext(row: InsertRow, traceContext: string | null): InsertRow {
  return traceContext === null ? row : { ...row, traceContext };
}
