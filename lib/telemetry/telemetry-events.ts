/**
 * Every telemetry event (SPEC §20). Published on `diagnostics_channel` as
 * `gen_durable:<event>` (only when subscribed) and on `engine.events$`.
 */
export type GenDurableEventName =
  | 'step:stop'
  | 'pick:stop'
  | 'scheduler:saturation'
  | 'scheduler:drain'
  | 'scheduler:reclaimed'
  | 'scheduler:stall'
  | 'concurrency:contended'
  | 'concurrency:throttled'
  | 'rate_limit:throttled'
  | 'rate_limit:contended'
  | 'rate_limit:unknown'
  | 'outcome:stale'
  | 'run_ahead:continue'
  | 'run_ahead:yield'
  | 'reaper:reaped'
  | 'reaper:poisoned'
  | 'await:timeout'
  | 'gc:swept'
  | 'flush:error'
  | 'insert_batch:error'
  | 'executor:crash'
  | 'boot:warning';

/** One published event. */
export interface GenDurableEvent {
  readonly event: GenDurableEventName;
  /** Engine name. */
  readonly engine: string;
  /** Epoch ms. */
  readonly at: number;
  readonly measurements: Readonly<Record<string, number>>;
  readonly metadata: Readonly<Record<string, unknown>>;
}
