import { GenDurableError } from './gen-durable.error';

/** A signal found no live instance to deliver to (missing, terminal, not yet inserted, or its key freed). Nothing was stored. */
export class NoTargetError extends GenDurableError {
  readonly code = 'GD_NO_TARGET';
  constructor(readonly target: string) {
    super(`no live instance for ${target}: the signal was not stored`);
  }
}
