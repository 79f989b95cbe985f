import { InvalidInputError } from '../errors/invalid-input.error';

/** A concurrency or rate-limit key: a string, or `[name, partition]` stored as `"name:partition"`. */
export type LimitKey = string | readonly [string, string | number];

/** `[name, partition]` → `"name:partition"`; strings as-is (docs/design.md §2.4). */
export function limitKeyText(key: LimitKey, path: string): string {
  if (typeof key === 'string') {
    if (key.length === 0) throw new InvalidInputError(path, 'must be a non-empty string');
    return key;
  }
  if (Array.isArray(key) && key.length === 2 && typeof key[0] === 'string' && key[0].length > 0) {
    const partition = key[1];
    if (
      typeof partition === 'string' ||
      (typeof partition === 'number' && Number.isFinite(partition))
    ) {
      return `${key[0]}:${String(partition)}`;
    }
  }
  throw new InvalidInputError(path, 'must be a string or [name, partition]');
}

/** The limit name of a key: the part before the first `:`. */
export function limitName(key: string): string {
  const i = key.indexOf(':');
  return i < 0 ? key : key.slice(0, i);
}
