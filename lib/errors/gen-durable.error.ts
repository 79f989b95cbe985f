/**
 * Base class of every error gen-durable throws on purpose. `code` is stable across releases:
 * match on it (or on the subclass), never on the message text.
 */
export abstract class GenDurableError extends Error {
  abstract readonly code: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
