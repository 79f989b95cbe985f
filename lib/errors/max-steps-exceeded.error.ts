import { GenDurableError } from './gen-durable.error';

/** A testing drain ran more steps than its `maxSteps`. */
export class MaxStepsExceededError extends GenDurableError {
  readonly code = 'GD_MAX_STEPS_EXCEEDED';
  constructor(readonly maxSteps: number) {
    super(
      `drain ran more than ${maxSteps} steps: an FSM probably loops; raise maxSteps if that is intended`,
    );
  }
}
