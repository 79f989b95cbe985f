import type { Type } from '@nestjs/common';

import { STEP_INTERCEPTORS_METADATA } from '../gen-durable.constants';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';

/**
 * Wraps every step of a `@DurableFsm()` class in these interceptors (docs/interceptors.md),
 * in order, inside the module's `stepInterceptors`. Each is a provider class, resolved from
 * Nest's container at boot (a class that is no provider fails boot with a ConfigurationError).
 * Applied twice, the lists add up in application order.
 */
export function UseStepInterceptors(
  ...interceptors: readonly Type<DurableStepInterceptor>[]
): ClassDecorator {
  return (target) => {
    const current =
      (Reflect.getOwnMetadata(STEP_INTERCEPTORS_METADATA, target) as
        readonly Type<DurableStepInterceptor>[] | undefined) ?? [];
    Reflect.defineMetadata(STEP_INTERCEPTORS_METADATA, [...interceptors, ...current], target);
  };
}
