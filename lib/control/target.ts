import { inspect } from 'node:util';

import { InvalidInputError } from '../errors/invalid-input.error';

/**
 * Addresses an instance: its id (bare, or as `{ id }`), or `{ correlationKey }` (docs/design.md
 * §11): for a signal the key's live occupant only; for reads and manual actions (get, await,
 * history, explain, retry, fork) the live occupant, else the most recent ended instance with
 * the key (docs/identity.md "Finding an instance by key").
 */
export type Target = string | bigint | { id: string | bigint } | { correlationKey: string };

/** A validated target: a canonical id text, or a non-empty key. */
export type ResolvedTarget = { readonly id: string } | { readonly correlationKey: string };

const MAX_BIGINT = 9_223_372_036_854_775_807n;

/** A positive bigint id as its decimal text; `InvalidInputError` at `path` otherwise. */
export function idText(id: unknown, path = 'id'): string {
  const text = typeof id === 'bigint' ? id.toString() : id;
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,18}$/.test(text) || BigInt(text) > MAX_BIGINT) {
    throw new InvalidInputError(path, `must be a positive bigint id, got ${describe(id)}`);
  }
  return text;
}

/** A non-empty correlation key; `InvalidInputError` at `path` otherwise. */
export function keyText(key: unknown, path = 'correlationKey'): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidInputError(path, 'must be a non-empty string');
  }
  return key;
}

/**
 * Validates a caller's target: a bare id (string or bigint), `{ id }` or `{ correlationKey }`
 * (exactly one own key). Any other shape is `InvalidInputError` naming `path`.
 */
export function resolveTarget(target: unknown, path: string): ResolvedTarget {
  if (typeof target === 'string' || typeof target === 'bigint') {
    return { id: idText(target, path) };
  }
  if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
    const keys = Object.keys(target);
    if (keys.length === 1 && keys[0] === 'id') {
      return { id: idText((target as { id: unknown }).id, `${path}.id`) };
    }
    if (keys.length === 1 && keys[0] === 'correlationKey') {
      const key = (target as { correlationKey: unknown }).correlationKey;
      return { correlationKey: keyText(key, `${path}.correlationKey`) };
    }
  }
  throw new InvalidInputError(
    path,
    `must be an id (string or bigint), { id } or { correlationKey }, got ${describe(target)}`,
  );
}

/** How errors and assertion messages name a target. */
export function targetLabel(target: ResolvedTarget): string {
  return 'id' in target ? `id ${target.id}` : `correlation key "${target.correlationKey}"`;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return `an object with keys [${Object.keys(value).join(', ')}]`;
  if (typeof value === 'string') return JSON.stringify(value.slice(0, 40));
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  return `${typeof value} ${inspect(value).slice(0, 40)}`;
}
