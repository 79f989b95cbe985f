import { STEP_METADATA } from '../gen-durable.constants';

/**
 * Marks a method of a `@DurableFsm()` class as a step. The step name defaults to the method
 * name. The method receives a `StepContext` and returns (or resolves to) an outcome.
 */
export function Step(name?: string): MethodDecorator {
  return (target, propertyKey) => {
    const ctor = target.constructor;
    const existing = (Reflect.getOwnMetadata(STEP_METADATA, ctor) as
      Array<[string, string | symbol]> | undefined) ?? [
      ...((Reflect.getMetadata(STEP_METADATA, ctor) as
        Array<[string, string | symbol]> | undefined) ?? []),
    ];
    existing.push([name ?? String(propertyKey), propertyKey]);
    Reflect.defineMetadata(STEP_METADATA, existing, ctor);
  };
}
