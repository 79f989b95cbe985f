import { InvalidInputError } from '../errors/invalid-input.error';
import { MAX_UNTIL_MS, MIN_UNTIL_MS } from '../fsm/outcome';

/**
 * The input checks of the control functions (cancel, retry, bulk, fork, list / count, history,
 * queue pause): each refuses bad input with an `InvalidInputError` naming the field's path,
 * before anything runs. One allow-list idiom for option keys ({@link knownKeys}) and for
 * enumerated values ({@link oneOf}).
 */

/** The keys of `value` not in `allowed`, in the order they appear (none: `[]`). */
export function unknownKeys(value: object, allowed: readonly string[]): string[] {
  return Object.keys(value).filter((k) => !allowed.includes(k));
}

/**
 * Refuses a key of `value` outside `allowed`: `InvalidInputError` at `path`, or with
 * `nameKey` at `path.<first unknown key>`, its message listing the unknown and the known keys.
 */
export function knownKeys(
  value: object,
  allowed: readonly string[],
  path: string,
  options: { readonly nameKey?: boolean } = {},
): void {
  const unknown = unknownKeys(value, allowed);
  if (unknown.length === 0) return;
  throw new InvalidInputError(
    options.nameKey ? `${path}.${unknown[0]}` : path,
    `unknown key(s) ${unknown.join(', ')}; known: ${allowed.join(', ')}`,
  );
}

/** `value` when it is one of `allowed`; `InvalidInputError` at `path` naming them otherwise. */
export function oneOf<T extends string>(value: unknown, allowed: readonly T[], path: string): T {
  if (!(allowed as readonly unknown[]).includes(value)) {
    throw new InvalidInputError(
      path,
      `must be one of ${allowed.join(', ')}, got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  return value as T;
}

/**
 * The options object of a call: `undefined` when not given; a plain object whose keys are all
 * in `allowed` (else {@link knownKeys} at `path.<key>`); anything else is refused at `path`
 * (`must be an object`, followed by `shape` when given).
 */
export function optionsObject(
  value: unknown,
  allowed: readonly string[],
  path: string,
  options: { readonly nameKey?: boolean; readonly shape?: string } = {},
): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError(
      path,
      options.shape ? `must be an object ${options.shape}` : 'must be an object',
    );
  }
  knownKeys(value, allowed, path, { nameKey: options.nameKey ?? true });
  return value as Record<string, unknown>;
}

/** A boolean option: `fallback` when absent, else it must be a boolean. */
export function flag(value: unknown, path: string, fallback = false): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidInputError(path, 'must be a boolean');
  return value;
}

/** A non-empty string option (a step name), or undefined when absent. */
export function nonEmptyText(value: unknown, path: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidInputError(path, 'must be a non-empty string');
  }
  return value;
}

/** A due time option (`at`): a valid Date in years 1 … 9999, or undefined when absent. */
export function dueDate(value: unknown, path: string): Date | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : NaN;
  if (!(ms >= MIN_UNTIL_MS && ms <= MAX_UNTIL_MS)) {
    throw new InvalidInputError(path, 'must be a valid Date in years 1 … 9999');
  }
  return new Date(ms);
}

/** An integer option in `min` … `max`: `fallback` when absent. */
export function integerIn(
  value: unknown,
  path: string,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(
      path,
      `must be an integer in ${min}…${max}, got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  return value;
}
