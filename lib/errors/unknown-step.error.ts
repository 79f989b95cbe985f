import { GenDurableError } from './gen-durable.error';

/** An outcome or insert named a step the FSM does not define. */
export class UnknownStepError extends GenDurableError {
  readonly code = 'GD_UNKNOWN_STEP';
  constructor(
    readonly fsm: string,
    readonly step: string,
  ) {
    super(`FSM "${fsm}" has no step "${step}"`);
  }
}
