import type { StandardSchemaV1 } from '@standard-schema/spec';

import { InvalidInputError } from '../errors/invalid-input.error';

/**
 * Validates `value` with a Standard Schema (docs/schemas.md): its output (the schema may
 * transform), or `InvalidInputError` at `path` plus the first issue's path, with the schema's
 * own messages. Synchronous when the schema is; a schema whose `validate` answers a promise
 * gives a promise.
 */
export function validateWithSchema(
  schema: StandardSchemaV1,
  value: unknown,
  path: string,
): unknown {
  const result = schema['~standard'].validate(value);
  if (result instanceof Promise) return result.then((settled) => outputOf(settled, path));
  return outputOf(result, path);
}

function outputOf(result: StandardSchemaV1.Result<unknown>, path: string): unknown {
  if (result.issues === undefined) return result.value;
  const [first, ...rest] = result.issues;
  if (first === undefined) throw new InvalidInputError(path, 'refused by its schema');
  const problems = [first.message, ...rest.map((i) => `${issuePath(path, i)}: ${i.message}`)];
  throw new InvalidInputError(issuePath(path, first), problems.join('; '));
}

/** `path` followed by the issue's path: `.key` per property, `[n]` per index. */
function issuePath(path: string, issue: StandardSchemaV1.Issue): string {
  let out = path;
  for (const segment of issue.path ?? []) {
    const key = typeof segment === 'object' ? segment.key : segment;
    out += typeof key === 'number' ? `[${key}]` : `.${String(key)}`;
  }
  return out;
}
