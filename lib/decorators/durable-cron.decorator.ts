import type { DurableCronOptions } from '../cron/schedule-spec';
import { CRON_METADATA } from '../gen-durable.constants';

/** One `@DurableCron()` as stored on its class. */
export interface DurableCronMetadata {
  readonly expression: unknown;
  readonly options: DurableCronOptions;
}

/**
 * Declares a cron schedule on a `@DurableFsm()` class (docs/design.md §29): each occurrence of
 * `expression` inserts one instance of the FSM, exactly once across any number of nodes. A
 * class may carry several, each with its own `name`. The expression, zone and options are
 * validated at boot (a `ConfigurationError` naming the schedule), and the schedule is upserted
 * into `gen_durable_schedules`.
 */
export function DurableCron(expression: string, options: DurableCronOptions = {}): ClassDecorator {
  return (target) => {
    const existing =
      (Reflect.getOwnMetadata(CRON_METADATA, target) as DurableCronMetadata[] | undefined) ?? [];
    // Decorators apply bottom-up: the one written first is unshifted last and stays first.
    Reflect.defineMetadata(
      CRON_METADATA,
      [{ expression, options: { ...options } }, ...existing],
      target,
    );
  };
}
