import type { StepContext } from './step-context';

/**
 * Wraps every step of the FSMs it applies to (docs/interceptors.md): `intercept` runs around
 * the step, `next()` runs the rest of the chain and then the step, answering what the step
 * returned. An interceptor may run code before and after, set up a context (nestjs-cls,
 * tenancy, logging), or answer without calling `next()` (its answer is then the step's
 * outcome). A throw, or a rejected promise, is a step throw: it goes through `onError`.
 * Registered globally (`stepInterceptors` module option) or per FSM (`@UseStepInterceptors`);
 * resolved from Nest's container, so an interceptor is a provider with its own dependencies.
 */
export interface DurableStepInterceptor {
  intercept(ctx: StepContext<unknown>, next: () => Promise<unknown>): Promise<unknown>;
}
