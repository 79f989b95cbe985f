/** A validated, serialized row ready for INSERT_INSTANCE / INSERT_INSTANCES. */
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
}
