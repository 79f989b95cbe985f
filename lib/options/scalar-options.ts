import { inspect } from 'node:util';

import { ConfigurationError } from '../errors/configuration.error';
import type { OptionDeclaration, OptionDefault, OptionUnit } from './option-declaration';
import { isPlainObject } from './option-declaration';
import { type RedisMode, redisMode } from './redis-mode';

/**
 * The kinds of single-valued options: integers and durations, positive numbers, non-empty
 * strings, booleans, a choice of words (optionally or `{ redis }`) and a custom check. Each
 * returns an OptionDeclaration whose `resolve` applies the default and validates, throwing a
 * ConfigurationError that names the option's path.
 */

/** The default of an option that must be given. */
export const REQUIRED = 'required';

/** A default worked out when the options are resolved; `text` is how the docs say it. */
export interface ComputedDefault<T> {
  readonly text: string;
  readonly value: () => T;
}

/** A default worked out at resolve time, e.g. `computed('the hostname', hostname)`. */
export function computed<T>(text: string, value: () => T): ComputedDefault<T> {
  return { text, value };
}

type Default<T> = typeof REQUIRED | { readonly value: T } | ComputedDefault<T>;

/**
 * The one place a default is applied: a missing value becomes the default, which is then
 * checked like a given one (so an environment-provided default is validated too). A computed
 * default that is `undefined` stays undefined (the enclosing component fills it).
 */
function declare<T>(
  doc: string,
  fallback: Default<T>,
  parse: (raw: unknown, path: string) => T,
  unit?: OptionUnit,
): OptionDeclaration<T> {
  let known: OptionDefault;
  if (fallback === REQUIRED) known = { kind: 'required' };
  else if ('text' in fallback) known = { kind: 'computed', text: fallback.text };
  else known = { kind: 'value' };
  return {
    doc,
    default: known,
    ...(unit === undefined ? {} : { unit }),
    resolve(raw, path) {
      if (raw !== undefined || fallback === REQUIRED) return parse(raw, path);
      const value = 'text' in fallback ? fallback.value() : fallback.value;
      return value === undefined ? value : parse(value, path);
    },
  };
}

function parseInteger(min: number) {
  return (raw: unknown, path: string): number => {
    if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < min) {
      throw new ConfigurationError(path, `must be an integer ≥ ${min}, got ${inspect(raw)}`);
    }
    return raw;
  };
}

/** An integer count ≥ `min`. */
export function integer(o: {
  doc: string;
  min: number;
  default: number | typeof REQUIRED;
  unit?: OptionUnit;
}): OptionDeclaration<number> {
  const fallback = o.default === REQUIRED ? REQUIRED : { value: o.default };
  return declare(o.doc, fallback, parseInteger(o.min), o.unit);
}

/** An integer count ≥ `min`, or `'auto'` (the default: the runtime sizes it). */
export function integerOrAuto(o: { doc: string; min: number }): OptionDeclaration<number | 'auto'> {
  const parse = parseInteger(o.min);
  return declare<number | 'auto'>(o.doc, { value: 'auto' }, (raw, path) => {
    if (raw === 'auto') return 'auto';
    if (typeof raw !== 'number') {
      throw new ConfigurationError(
        path,
        `must be 'auto' or an integer ≥ ${o.min}, got ${inspect(raw)}`,
      );
    }
    return parse(raw, path);
  });
}

/** A whole number of milliseconds ≥ `min`. */
export function duration(o: {
  doc: string;
  min: number;
  default: number;
}): OptionDeclaration<number> {
  return integer({ ...o, unit: 'ms' });
}

/** A finite number > 0, or a ConfigurationError at `path`. */
export function parsePositive(raw: unknown, path: string): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw <= 0) {
    throw new ConfigurationError(path, `must be a positive number, got ${String(raw)}`);
  }
  return raw;
}

/** A finite number > 0; required, or left undefined for the enclosing component to fill. */
export function positiveNumber(o: {
  doc: string;
  default: typeof REQUIRED;
}): OptionDeclaration<number>;
export function positiveNumber(o: {
  doc: string;
  default: ComputedDefault<undefined>;
}): OptionDeclaration<number | undefined>;
export function positiveNumber(o: {
  doc: string;
  default: typeof REQUIRED | ComputedDefault<undefined>;
}): OptionDeclaration<number | undefined> {
  return declare<number | undefined>(o.doc, o.default, parsePositive);
}

function parseText(raw: unknown, path: string): string {
  if (typeof raw !== 'string' || raw.length === 0) {
    throw new ConfigurationError(path, 'must be a non-empty string');
  }
  return raw;
}

/** A non-empty string. */
export function text(o: {
  doc: string;
  default: string | ComputedDefault<string>;
}): OptionDeclaration<string> {
  const fallback = typeof o.default === 'string' ? { value: o.default } : o.default;
  return declare(o.doc, fallback, parseText);
}

function parseFlag(raw: unknown, path: string): boolean {
  // A string 'false' would otherwise be truthy: never a silent default (docs/reliability.md F-R6).
  if (typeof raw !== 'boolean') {
    throw new ConfigurationError(path, `must be a boolean, got ${inspect(raw)}`);
  }
  return raw;
}

/** `true` or `false`, nothing truthy. */
export function flag(o: { doc: string; default: boolean }): OptionDeclaration<boolean> {
  return declare(o.doc, { value: o.default }, parseFlag);
}

/** One of the words `values`, or with `orRedis` also `{ redis: url | ioredisOptions }`. */
export function choice<const C extends string>(o: {
  doc: string;
  values: readonly C[];
  default: C;
}): OptionDeclaration<C>;
export function choice<const C extends string>(o: {
  doc: string;
  values: readonly C[];
  default: C;
  orRedis: true;
}): OptionDeclaration<C | RedisMode>;
export function choice<const C extends string>(o: {
  doc: string;
  values: readonly C[];
  default: C;
  orRedis?: true;
}): OptionDeclaration<C | RedisMode> {
  const words = o.values.map((v) => `'${v}'`);
  const expected = o.orRedis
    ? `${words.join(', ')} or { redis }`
    : `${words.slice(0, -1).join(', ')}${words.length > 1 ? ' or ' : ''}${words.at(-1) ?? ''}`;
  return declare<C | RedisMode>(o.doc, { value: o.default }, (raw, path) => {
    if (o.values.includes(raw as C)) return raw as C;
    if (o.orRedis && isPlainObject(raw)) return redisMode(path, raw);
    throw new ConfigurationError(path, `must be ${expected}, got ${String(raw)}`);
  });
}

/** An option with its own check: `parse` returns the value or throws a ConfigurationError. */
export function custom<T>(o: {
  doc: string;
  default: typeof REQUIRED;
  parse: (raw: unknown, path: string) => T;
}): OptionDeclaration<T>;
export function custom<T, D>(o: {
  doc: string;
  default: ComputedDefault<D> | { readonly value: D };
  parse: (raw: unknown, path: string) => T;
}): OptionDeclaration<T | D>;
export function custom<T, D>(o: {
  doc: string;
  default: typeof REQUIRED | ComputedDefault<D> | { readonly value: D };
  parse: (raw: unknown, path: string) => T;
}): OptionDeclaration<T | D> {
  return declare<T | D>(o.doc, o.default, o.parse);
}
