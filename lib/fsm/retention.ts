/**
 * How long an ended instance is kept before the GC deletes it, ms, by how it ended
 * (docs/operations.md, "Garbage collection"). Module defaults come from `gc`; an FSM may
 * override any of them with `@DurableFsm({ retention })`.
 */
export interface Retention {
  readonly done: number;
  readonly failed: number;
  readonly cancelled: number;
}

/** `@DurableFsm({ retention })`: the statuses this FSM keeps for another time than the module's. */
export type RetentionOverride = Partial<Retention>;
