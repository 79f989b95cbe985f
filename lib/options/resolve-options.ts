import { ConfigurationError } from '../errors/configuration.error';
import type { GenDurableOptions } from './gen-durable-options.interface';
import { isPlainObject, rejectUnknownKeys } from './option-declaration';
import { OPTION_RULES } from './option-rules';
import { MODULE_OPTION_TABLE, OPTION_TABLE } from './option-table';
import type { ResolvedOptions } from './resolved-options';

const ACCEPTED_KEYS: readonly string[] = [
  ...Object.keys(OPTION_TABLE),
  ...Object.keys(MODULE_OPTION_TABLE),
];

/**
 * Applies defaults and validates options by the option table (docs/design.md §22). Throws a
 * ConfigurationError naming the offending path before anything is started. The result is
 * deeply frozen.
 */
export function resolveOptions(raw: GenDurableOptions): ResolvedOptions {
  if (!isPlainObject(raw)) throw new ConfigurationError('options', 'must be an object');
  const given: Record<string, unknown> = raw;
  rejectUnknownKeys('options', given, ACCEPTED_KEYS);
  for (const [name, declaration] of Object.entries(MODULE_OPTION_TABLE)) {
    declaration.resolve(given[name], name, name);
  }
  const resolved: Record<string, unknown> = {};
  for (const [name, declaration] of Object.entries(OPTION_TABLE)) {
    resolved[name] = declaration.resolve(given[name], name, name);
  }
  let options = resolved as ResolvedOptions;
  for (const rule of OPTION_RULES) options = { ...options, ...rule(options) };
  return Object.freeze(options);
}
