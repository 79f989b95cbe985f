/** Metadata key written by `@DurableFsm()` on a class. */
export const DURABLE_FSM_METADATA = 'gen-durable:fsm';
/** Metadata key written by `@Step()` on a class (map of step name → method name). */
export const STEP_METADATA = 'gen-durable:steps';
/** Default engine name (docs/design.md §22). */
export const DEFAULT_ENGINE_NAME = 'GenDurable';
/** The statuses in which an instance is live (docs/design.md §3.1). */
export const LIVE_STATUSES = [
  'runnable',
  'executing',
  'awaiting_signal',
  'awaiting_children',
] as const;
/** Every status of the `durable_status` enum. */
export const ALL_STATUSES = [...LIVE_STATUSES, 'done', 'failed'] as const;
export type DurableStatus = (typeof ALL_STATUSES)[number];
/** Injection token of a GenDurableModule instance's raw options. */
export const GEN_DURABLE_MODULE_OPTIONS = 'GEN_DURABLE_MODULE_OPTIONS';
/** Injection token of a GenDurableModule instance's engine name. */
export const GEN_DURABLE_ENGINE_NAME = 'gen-durable:engine-name';
