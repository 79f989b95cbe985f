import { DURABLE_FSM_METADATA, STEP_METADATA } from '../gen-durable.constants';
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
} as const;
