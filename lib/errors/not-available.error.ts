import { GenDurableError } from './gen-durable.error';

/**
 * An operation this face of the engine cannot answer: `GenDurableClient` runs no engine, so it
 * has no `@DurableFsm` classes (no `graph`, `stepCounts`, `fork`, `registeredFsms`) and does
 * not know the engines' limiter (no `limiterStatus`); docs/design.md §32. Nothing was done.
 */
export class NotAvailableError extends GenDurableError {
  readonly code = 'GD_NOT_AVAILABLE';
  constructor(
    readonly operation: string,
    why: string,
  ) {
    super(`${operation} is not available here: ${why}`);
  }
}
