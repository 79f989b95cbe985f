import {
  CRON_METADATA,
  DURABLE_EVENT_METADATA,
  DURABLE_FSM_METADATA,
  STEP_INTERCEPTORS_METADATA,
  STEP_METADATA,
} from '../gen-durable.constants';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';
import type { DurableEventMetadata } from '../decorators/on-durable-event.decorator';
import type { DurableCronMetadata } from '../decorators/durable-cron.decorator';
import type { DurableFsmMetadata } from '../decorators/durable-fsm.decorator';
import type { StepMetadata } from '../decorators/step.decorator';

/** The only reader of gen-durable decorator metadata. */
export const FsmMetadataAccessor = {
  fsm(target: unknown): DurableFsmMetadata | undefined {
    if (typeof target !== 'function') return undefined;
    return Reflect.getMetadata(DURABLE_FSM_METADATA, target) as DurableFsmMetadata | undefined;
  },
  steps(target: unknown): readonly StepMetadata[] {
    if (typeof target !== 'function') return [];
    return (Reflect.getMetadata(STEP_METADATA, target) as StepMetadata[] | undefined) ?? [];
  },
  events(target: unknown): readonly DurableEventMetadata[] {
    if (typeof target !== 'function') return [];
    return (
      (Reflect.getMetadata(DURABLE_EVENT_METADATA, target) as DurableEventMetadata[] | undefined) ??
      []
    );
  },
  /** `@UseStepInterceptors` classes of a class, in order (none: `[]`). */
  stepInterceptors(
    target: unknown,
  ): readonly (abstract new (...args: never[]) => DurableStepInterceptor)[] {
    if (typeof target !== 'function') return [];
    return (
      (Reflect.getOwnMetadata(STEP_INTERCEPTORS_METADATA, target) as
        (abstract new (...args: never[]) => DurableStepInterceptor)[] | undefined) ?? []
    );
  },
  crons(target: unknown): readonly DurableCronMetadata[] {
    if (typeof target !== 'function') return [];
    return (
      (Reflect.getOwnMetadata(CRON_METADATA, target) as DurableCronMetadata[] | undefined) ?? []
    );
  },
} as const;
