import type { StandardSchemaV1 } from '@standard-schema/spec';

import type { InsertOptions } from './insert-options.interface';
import { validateWithSchema } from './schema-validation';

/**
 * An insert's options with its state validated by the FSM's state schema (docs/schemas.md):
 * `state` (or `args`, or `{}` when neither is given) replaced by the schema's output, which is
 * what gets stored. A promise when the schema is asynchronous. Options that are not an object,
 * or give both `state` and `args`, are answered unchanged: `buildInsertRow` refuses them.
 */
export function withSchemaState(
  schema: StandardSchemaV1,
  input: InsertOptions | undefined,
  path: string,
): InsertOptions | Promise<InsertOptions> | undefined {
  if (input !== undefined && (typeof input !== 'object' || input === null)) return input;
  if (input?.state !== undefined && input.args !== undefined) return input;
  const { args, ...rest } = input ?? {};
  const output = validateWithSchema(schema, input?.state ?? args ?? {}, `${path}.state`);
  const place = (state: unknown): InsertOptions => ({
    ...rest,
    state: state as Record<string, unknown>,
  });
  return output instanceof Promise ? output.then(place) : place(output);
}
