import type { StepFunction } from '../discovery/fsm-definition';
import type { StepContext } from '../fsm/step-context';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';

/**
 * Calls `step` inside `interceptors`, the first outermost (docs/interceptors.md): each gets the
 * context and a `next()` that runs the rest of the chain, then the step. A synchronous throw of
 * an interceptor or of the step becomes a rejected promise, so every throw reaches the caller
 * as the step's own would. Built per call only for an FSM that has interceptors: the executor
 * calls the step bare otherwise.
 */
export function interceptedStep(
  interceptors: readonly DurableStepInterceptor[],
  step: StepFunction,
  ctx: StepContext<unknown>,
): Promise<unknown> {
  const call = (index: number): Promise<unknown> => {
    try {
      if (index === interceptors.length) return Promise.resolve(step(ctx));
      return interceptors[index]!.intercept(ctx, () => call(index + 1));
    } catch (err) {
      // The thrown value as is, whatever it is: onError sees what the code threw.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      return Promise.reject(err);
    }
  };
  return call(0);
}
