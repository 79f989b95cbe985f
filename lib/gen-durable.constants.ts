/** Metadata key written by `@DurableFsm()` on a class. */
export const DURABLE_FSM_METADATA = 'gen-durable:fsm';
/** Metadata key written by `@Step()` on a class (map of step name → method name). */
export const STEP_METADATA = 'gen-durable:steps';
/** Metadata key written by `@DurableCron()` on a class (its schedule declarations, in order). */
export const CRON_METADATA = 'gen-durable:cron';
/** Metadata key written by `@OnDurableEvent()` on a class (its listeners, in order). */
export const DURABLE_EVENT_METADATA = 'gen-durable:events';
/** Metadata key written by `@UseStepInterceptors()` on a class (its interceptor classes, in order). */
export const STEP_INTERCEPTORS_METADATA = 'gen-durable:step-interceptors';
/** Default engine name (docs/design.md §22). */
export const DEFAULT_ENGINE_NAME = 'GenDurable';

/**
 * The injection token of an engine: `'GenDurableEngine:<name>'`, the same string in every copy of
 * the package (the default engine is also injectable as `EngineService`). A pure string function,
 * so `@InjectEngine` loads no engine code.
 */
export function getEngineToken(name: string = DEFAULT_ENGINE_NAME): string {
  return `GenDurableEngine:${name}`;
}
/** The statuses in which an instance is live (docs/design.md §3.1). */
export const LIVE_STATUSES = [
  'runnable',
  'executing',
  'awaiting_signal',
  'awaiting_children',
] as const;
/** The statuses in which an instance has ended; it never changes again except by a manual retry (docs/design.md §3.1, §27). */
export const TERMINAL_STATUSES = ['done', 'failed', 'cancelled'] as const;
/** Every status of the `gen_durable_status` enum. */
export const ALL_STATUSES = [...LIVE_STATUSES, ...TERMINAL_STATUSES] as const;
export type DurableStatus = (typeof ALL_STATUSES)[number];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
export type LiveStatus = (typeof LIVE_STATUSES)[number];

/** True for `done`, `failed` and `cancelled` (exhaustive: a new status fails compilation here). */
export function isTerminalStatus(status: DurableStatus): status is TerminalStatus {
  switch (status) {
    case 'done':
    case 'failed':
    case 'cancelled':
      return true;
    case 'runnable':
    case 'executing':
    case 'awaiting_signal':
    case 'awaiting_children':
      return false;
    default: {
      const unhandled: never = status;
      throw new Error(`unhandled status: ${String(unhandled)}`);
    }
  }
}
/** Injection token of a GenDurableModule instance's raw options. */
export const GEN_DURABLE_MODULE_OPTIONS = 'GEN_DURABLE_MODULE_OPTIONS';
/** Injection token of a GenDurableModule instance's engine name. */
export const GEN_DURABLE_ENGINE_NAME = 'gen-durable:engine-name';
