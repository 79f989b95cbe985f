import { GenDurableError } from './gen-durable.error';

/**
 * No instance answered: a signal found no live instance to deliver to (missing, terminal, not
 * yet inserted, or its key freed), or a cancel / retry found no instance at all (missing,
 * collected by GC, or its key freed). Nothing was changed.
 */
export class NoTargetError extends GenDurableError {
  readonly code = 'GD_NO_TARGET';
  /** `consequence`: what was not done, for a cancel or retry (default: a signal's). */
  constructor(
    readonly target: string,
    consequence?: string,
  ) {
    super(
      consequence === undefined
        ? `no live instance for ${target}: the signal was not stored`
        : `no instance for ${target}: ${consequence}`,
    );
  }
}
