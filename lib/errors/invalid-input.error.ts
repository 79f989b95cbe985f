import { GenDurableError } from './gen-durable.error';

/** An insert, signal or outcome argument broke an input policy (docs/design.md §26.8); `path` names the offending field. Nothing was written. */
export class InvalidInputError extends GenDurableError {
  readonly code = 'GD_INVALID_INPUT';
  constructor(
    readonly path: string,
    problem: string,
  ) {
    super(`invalid ${path}: ${problem}`);
  }
}
