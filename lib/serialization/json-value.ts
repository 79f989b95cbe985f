import { InvalidInputError } from '../errors/invalid-input.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';

/**
 * Serializes a value bound for a jsonb column, refusing anything JSON or jsonb would not hold
 * faithfully (docs/design.md §26.8): bigint, cycles, non-finite numbers, functions/symbols,
 * `undefined` anywhere but as an object property's value, Map/Set, typed arrays and buffers, holes
 * in sparse arrays, strings with `\u0000` or lone surrogates, and objects that JSON would not read
 * back as what they were: a `Date` (stored as a string) or any class instance, boxed primitives
 * and errors included (read back as a plain object or a primitive) — only plain objects (or
 * null-prototype ones) and arrays pass. An object property whose value is `undefined` is left
 * out, as JSON.stringify leaves it out: reading the stored object back gives `undefined` for it
 * again (absence, nothing lost), so `{ a: body.a }` with `a` unset stores `{}`. The size check
 * measures the text that is stored. A `stateCodec` is the place to convert other values. Errors
 * name the path of the offending value.
 */
export function toJsonText(value: unknown, path: string, maxBytes: number): string {
  check(value, path, new Set());
  const text = JSON.stringify(value);
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) throw new PayloadTooLargeError(path, bytes, maxBytes);
  return text;
}

/** As {@link toJsonText}, and the value must be a JSON object (not an array or null). */
export function toJsonObjectText(value: unknown, path: string, maxBytes: number): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError(
      path,
      `must be a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`,
    );
  }
  return toJsonText(value, path, maxBytes);
}

function check(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000')) {
        throw new InvalidInputError(path, 'contains \\u0000, which PostgreSQL jsonb cannot store');
      }
      if (!value.isWellFormed()) {
        throw new InvalidInputError(
          path,
          'contains a lone surrogate, which PostgreSQL jsonb cannot store',
        );
      }
      return;
    case 'number':
      if (!Number.isFinite(value)) {
        throw new InvalidInputError(path, `is ${String(value)}, which JSON cannot represent`);
      }
      return;
    case 'boolean':
      return;
    case 'bigint':
      throw new InvalidInputError(
        path,
        'is a bigint, which JSON cannot represent (store it as a string)',
      );
    case 'undefined':
    case 'function':
    case 'symbol':
      throw new InvalidInputError(path, `is ${typeof value}, which JSON would silently drop`);
    case 'object':
      break;
  }
  if (value === null) return;
  const object: object = value;
  if (seen.has(object)) throw new InvalidInputError(path, 'is a circular reference');
  if (
    object instanceof Map ||
    object instanceof Set ||
    object instanceof WeakMap ||
    object instanceof WeakSet
  ) {
    throw new InvalidInputError(
      path,
      `is a ${object.constructor.name}, which JSON would store as {} (convert it to an object or array)`,
    );
  }
  if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) {
    // JSON would store a Uint8Array as {"0": …, "1": …} and a buffer as {} (finding F-R5).
    throw new InvalidInputError(
      path,
      `is a ${object.constructor.name}, which JSON cannot store faithfully (convert it to an array or a base64 string)`,
    );
  }
  if (object instanceof Date) {
    throw new InvalidInputError(
      path,
      'is a Date, which JSON would store as a string and read back as one (store date.toISOString(), or convert it in a stateCodec)',
    );
  }
  const prototype: unknown = Object.getPrototypeOf(object);
  if (!Array.isArray(object) && prototype !== Object.prototype && prototype !== null) {
    throw new InvalidInputError(
      path,
      `is an instance of ${className(object)}, which JSON would read back as a plain object (convert it to a plain object, or in a stateCodec)`,
    );
  }
  seen.add(object);
  if (Array.isArray(object)) {
    // Index by index: forEach skips the holes of a sparse array, which JSON writes as null.
    const items: unknown[] = object;
    for (let i = 0; i < items.length; i++) {
      if (!(i in items)) {
        throw new InvalidInputError(
          `${path}[${i}]`,
          'is a hole in a sparse array, which JSON would store as null',
        );
      }
      if (items[i] === undefined) {
        throw new InvalidInputError(
          `${path}[${i}]`,
          'is undefined, which JSON would store as null',
        );
      }
      check(items[i], `${path}[${i}]`, seen);
    }
  } else {
    for (const [key, item] of Object.entries(object)) {
      // Absent, as JSON.stringify writes it: the key reads back as undefined (§26.8).
      if (item === undefined) continue;
      if (key.includes('\u0000') || !key.isWellFormed()) {
        throw new InvalidInputError(`${path}.${key}`, 'has a key PostgreSQL jsonb cannot store');
      }
      check(item, `${path}.${key}`, seen);
    }
  }
  seen.delete(object);
}

function className(object: object): string {
  const ctor: unknown = (object as { constructor?: unknown }).constructor;
  return typeof ctor === 'function' && ctor.name !== '' ? ctor.name : 'an anonymous class';
}
