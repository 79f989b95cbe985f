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
  if (typeof value === 'object' && value !== null) checkObject(value, path, undefined);
  else {
    const problem = primitiveProblem(value);
    if (problem !== undefined) throw new InvalidInputError(path, problem);
  }
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

/**
 * Why a value that is not an object cannot be stored, or undefined when it can (null, a
 * well-formed string without \u0000, a finite number, a boolean).
 */
function primitiveProblem(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      if (value.includes('\u0000')) return 'contains \\u0000, which PostgreSQL jsonb cannot store';
      if (!value.isWellFormed()) {
        return 'contains a lone surrogate, which PostgreSQL jsonb cannot store';
      }
      return undefined;
    case 'number':
      return Number.isFinite(value)
        ? undefined
        : `is ${String(value)}, which JSON cannot represent`;
    case 'boolean':
      return undefined;
    case 'bigint':
      return 'is a bigint, which JSON cannot represent (store it as a string)';
    case 'undefined':
    case 'function':
    case 'symbol':
      return `is ${typeof value}, which JSON would silently drop`;
    default:
      return value === null ? undefined : 'is not a JSON value';
  }
}

/**
 * Checks one object or array and what it holds. `above`: the objects on the way down to it (a
 * cycle is one of them), undefined at the top. It allocates only what a nested object needs:
 * the stack of objects above (created at the first object inside one) and the path of that
 * object; a child that is not an object is checked in place, and its path is spelled only
 * for the error. A state of primitives (the common case) allocates nothing here.
 */
function checkObject(object: object, path: string, above: object[] | undefined): void {
  if (above !== undefined && above.includes(object)) {
    throw new InvalidInputError(path, 'is a circular reference');
  }
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
  // This object and those above it, for its object children; pushed at the first one.
  let stack: object[] | undefined;
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
      const item = items[i];
      if (item === undefined) {
        throw new InvalidInputError(
          `${path}[${i}]`,
          'is undefined, which JSON would store as null',
        );
      }
      if (typeof item === 'object' && item !== null) {
        stack = pushed(stack, above, object);
        checkObject(item, `${path}[${i}]`, stack);
      } else {
        const problem = primitiveProblem(item);
        if (problem !== undefined) throw new InvalidInputError(`${path}[${i}]`, problem);
      }
    }
  } else {
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record);
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k]!;
      const item = record[key];
      // Absent, as JSON.stringify writes it: the key reads back as undefined (§26.8).
      if (item === undefined) continue;
      if (key.includes('\u0000') || !key.isWellFormed()) {
        throw new InvalidInputError(`${path}.${key}`, 'has a key PostgreSQL jsonb cannot store');
      }
      if (typeof item === 'object' && item !== null) {
        stack = pushed(stack, above, object);
        checkObject(item, `${path}.${key}`, stack);
      } else {
        const problem = primitiveProblem(item);
        if (problem !== undefined) throw new InvalidInputError(`${path}.${key}`, problem);
      }
    }
  }
  if (stack !== undefined) stack.pop();
}

/**
 * The stack of objects above a child of `object`: `stack` when `object` is already on it,
 * else `above` (or a new array at the top) with `object` pushed; popped when its check ends.
 */
function pushed(
  stack: object[] | undefined,
  above: object[] | undefined,
  object: object,
): object[] {
  if (stack !== undefined) return stack;
  const next = above ?? [];
  next.push(object);
  return next;
}

function className(object: object): string {
  const ctor: unknown = (object as { constructor?: unknown }).constructor;
  return typeof ctor === 'function' && ctor.name !== '' ? ctor.name : 'an anonymous class';
}
