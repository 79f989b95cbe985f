import { ConfigurationError } from '../errors/configuration.error';
import type {
  OptionDeclaration,
  OptionDefault,
  OptionFields,
  ResolvedFields,
} from './option-declaration';
import { isPlainObject, rejectUnknownKeys } from './option-declaration';

/**
 * The kinds of options that hold other options: a component object with its own fields
 * (`reaper`, `gc`, a flusher…), an object keyed by the user's names (`queues`, `rateLimits`)
 * and a list (`flushers`). Each checks its own shape and unknown keys, resolves its members
 * with their paths (`gc.retention`, `queues.emails`, `flushers[1].maxBatch`) and freezes the
 * result.
 */

interface SectionSpec<F extends OptionFields, R> {
  doc: string;
  fields: F;
  /** Turns the resolved fields into the resolved value (derived values, cross-field checks). */
  finish?: (values: ResolvedFields<F>, path: string, key: string) => R;
}

/**
 * A component object whose keys are `fields`; a missing one resolves to every field's default.
 * With `off: 'allowed'` the option may be `false` (none on this node); with `off: 'by-default'`
 * it is `false` unless given. Without `off`, `false` is refused ("cannot be disabled").
 */
export function section<F extends OptionFields, R = ResolvedFields<F>>(
  o: SectionSpec<F, R>,
): OptionDeclaration<R>;
export function section<F extends OptionFields, R = ResolvedFields<F>>(
  o: SectionSpec<F, R> & { off: 'allowed' | 'by-default' },
): OptionDeclaration<R | false>;
export function section<F extends OptionFields, R = ResolvedFields<F>>(
  o: SectionSpec<F, R> & { off?: 'allowed' | 'by-default' },
): OptionDeclaration<R | false> {
  const names = Object.keys(o.fields);
  const anyRequired = names.some((n) => o.fields[n]?.default.kind === 'required');
  const shape = `{ ${names
    .map((n) => (anyRequired && o.fields[n]?.default.kind !== 'required' ? `${n}?` : n))
    .join(', ')} }`;
  const expected = o.off === undefined ? shape : `${shape} or false`;
  const known: OptionDefault =
    anyRequired && o.off !== 'by-default' ? { kind: 'required' } : { kind: 'value' };
  return {
    doc: o.doc,
    default: known,
    fields: o.fields,
    resolve(raw, path, key) {
      if (raw === false) {
        if (o.off === undefined) throw new ConfigurationError(path, 'cannot be disabled');
        return false;
      }
      if (raw === undefined && o.off === 'by-default') return false;
      const given = raw ?? {};
      if (!isPlainObject(given)) throw new ConfigurationError(path, `must be ${expected}`);
      rejectUnknownKeys(path, given, names);
      const values: Record<string, unknown> = {};
      for (const name of names) {
        values[name] = o.fields[name]?.resolve(given[name], `${path}.${name}`, name);
      }
      const resolved = values as ResolvedFields<F>;
      return Object.freeze(o.finish ? o.finish(resolved, path, key) : (resolved as R));
    },
  };
}

/**
 * An object keyed by names the user chooses, each value an `entry`; `shape` says what it maps
 * (e.g. `'queue → concurrency'`). `default` is the raw value used when the option is missing.
 */
export function keyed<E>(o: {
  doc: string;
  shape: string;
  entry: OptionDeclaration<E>;
  default: Readonly<Record<string, unknown>>;
}): OptionDeclaration<Readonly<Record<string, E>>> {
  return {
    doc: o.doc,
    default: { kind: 'value' },
    entries: { by: 'name', declaration: o.entry },
    resolve(raw, path) {
      const given = raw ?? o.default;
      if (!isPlainObject(given)) {
        throw new ConfigurationError(path, `must be an object of ${o.shape}`);
      }
      const resolved: Record<string, E> = {};
      for (const [name, value] of Object.entries(given)) {
        resolved[name] = o.entry.resolve(value, `${path}.${name}`, name);
      }
      return Object.freeze(resolved);
    },
  };
}

/** A non-empty list of `entry`; `default` is the raw list used when the option is missing. */
export function list<E>(o: {
  doc: string;
  entry: OptionDeclaration<E>;
  default: readonly unknown[];
}): OptionDeclaration<readonly E[]> {
  return {
    doc: o.doc,
    default: { kind: 'value' },
    entries: { by: 'index', declaration: o.entry },
    resolve(raw, path) {
      const given = raw ?? o.default;
      if (!Array.isArray(given) || given.length === 0) {
        throw new ConfigurationError(path, 'must be a non-empty array');
      }
      return Object.freeze(
        given.map((v: unknown, i) => o.entry.resolve(v, `${path}[${i}]`, String(i))),
      );
    },
  };
}
