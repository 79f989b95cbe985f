import { ConfigurationError } from '../errors/configuration.error';

/**
 * The shape of one option's declaration: how it is validated and defaulted, what its default
 * is and how the docs describe it. Declarations are built with the kinds in `scalar-options.ts`
 * and `component-options.ts`, and listed once in `option-table.ts`.
 */

/** How an option's default is known, for the README and the docs check. */
export type OptionDefault =
  /** The value `resolve(undefined)` returns; the docs render and quote that value. */
  | { readonly kind: 'value' }
  /** Worked out at boot (the hostname, the discovered FSMs…); `text` is how the docs say it. */
  | { readonly kind: 'computed'; readonly text: string }
  /** No default: the option must be given. */
  | { readonly kind: 'required' };

/** The unit of a numeric option, so a doc may quote `30 s` for 30 000 ms. */
export type OptionUnit = 'ms' | 'bytes';

export interface OptionDeclaration<T> {
  /** One line for the README's Meaning column (and `docs/` where an option is explained). */
  readonly doc: string;
  readonly default: OptionDefault;
  readonly unit?: OptionUnit;
  /** A component object's own options: their names are the only keys it accepts. */
  readonly fields?: Readonly<Record<string, OptionDeclaration<unknown>>>;
  /** The declaration of each entry of an object keyed by the user's names, or of a list. */
  readonly entries?: {
    readonly by: 'name' | 'index';
    readonly declaration: OptionDeclaration<unknown>;
  };
  /**
   * The value to use for `raw` (undefined = not given → the default), or a ConfigurationError
   * naming `path`. `key` is the last segment of the path: the option, record key or index.
   */
  resolve(raw: unknown, path: string, key: string): T;
}

/** The resolved type of a declaration. */
export type ResolvedOf<D> = D extends OptionDeclaration<infer T> ? T : never;

/** Declarations by option name. */
export type OptionFields = Readonly<Record<string, OptionDeclaration<unknown>>>;

/** The resolved values of a set of fields, by name. */
export type ResolvedFields<F extends OptionFields> = { readonly [K in keyof F]: ResolvedOf<F[K]> };

/** Throws a ConfigurationError naming `path.key` for the first key of `value` not in `allowed`. */
export function rejectUnknownKeys(
  path: string,
  value: Record<string, unknown>,
  allowed: readonly string[],
): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ConfigurationError(
        `${path}.${key}`,
        `unknown option (expected one of: ${allowed.join(', ')})`,
      );
    }
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
