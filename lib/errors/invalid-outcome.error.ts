import { GenDurableError } from './gen-durable.error';

/** A step returned something that is not an outcome built by next/retry/awaitSignal/scheduleChildren/done/stop, or an outcome with invalid arguments. */
export class InvalidOutcomeError extends GenDurableError {
  readonly code = 'GD_INVALID_OUTCOME';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
