import { GenDurableError } from './gen-durable.error';

/** An insert met an occupied correlation key (docs/design.md §11): nothing was written. */
export class DuplicateError extends GenDurableError {
  readonly code = 'GD_DUPLICATE';
  constructor(readonly correlationKey: string) {
    super(
      `an instance with correlation key "${correlationKey}" already occupies that key; nothing was inserted`,
    );
  }
}
