import { createHash } from 'node:crypto';

import { InvalidInputError } from '../errors/invalid-input.error';
import {
  type InstanceCount,
  type ListResult,
  resolveInstanceFilter,
  type ResolvedFilter,
} from './instance-filter';
import type { StatementRunner } from '../sql/statement';
import { COUNT_INSTANCES, countDriver, LIST_INSTANCES, listDriver } from '../sql/query.sql';

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;
const DEFAULT_SCAN = 10_000;
const MAX_SCAN = 100_000;
const DEFAULT_CAP = 10_000;
const MAX_CAP = 1_000_000;
const DEFAULT_BUDGET_MS = 1_000;
const MAX_BUDGET_MS = 60_000;
const CURSOR_VERSION = 'gd1';

/**
 * `list` and `count` (docs/design.md §27.7) behind `EngineService`: validation (a typed error
 * naming the argument, nothing run), the driving index, the cursor. Keyset pagination on id,
 * newest first: a page costs one statement at any depth, and rows inserted while paging never
 * shift later pages (they have higher ids); rows that change status while paging are seen as
 * they are when their page is read. A cursor is opaque: the last id plus a fingerprint of the
 * filter it was made for, so it is refused with another filter.
 */
export class InstanceQuery {
  constructor(private readonly sql: StatementRunner) {}

  async list(filter: unknown, page: unknown): Promise<ListResult> {
    const f = resolveInstanceFilter(filter, 'list.filter');
    const { limit, after, scan } = pageOf(page, f);
    const answer = await LIST_INSTANCES.run(this.sql, {
      driver: listDriver(f),
      after,
      scan,
      limit,
      filter: f,
    });
    const last = answer.items[answer.items.length - 1];
    if (answer.items.length >= limit && last) {
      return { items: answer.items, next: encodeCursor(last.id, f) };
    }
    if (answer.scanned >= scan && answer.lastScanned !== null) {
      return { items: answer.items, next: encodeCursor(answer.lastScanned, f) };
    }
    return { items: answer.items };
  }

  /**
   * Matches up to the cap, read within the time budget (COUNT_INSTANCES): `capped` when the
   * cap was reached, `exact: false` when the budget ran out first (`count` is then a lower bound).
   */
  async count(filter: unknown, options: unknown): Promise<InstanceCount> {
    const f = resolveInstanceFilter(filter, 'count.filter');
    const { cap, budgetMs } = countOptionsOf(options);
    const answer = await COUNT_INSTANCES.run(this.sql, {
      driver: countDriver(f),
      cap,
      budgetMs,
      filter: f,
    });
    const capped = answer.count >= cap;
    return { count: answer.count, capped, exact: capped || answer.pulled < cap };
  }
}

function pageOf(
  page: unknown,
  f: ResolvedFilter,
): { limit: number; after: string | null; scan: number } {
  if (page === undefined) return { limit: DEFAULT_LIMIT, after: null, scan: DEFAULT_SCAN };
  if (typeof page !== 'object' || page === null || Array.isArray(page)) {
    throw new InvalidInputError('list.page', 'must be an object { limit?, after?, scanLimit? }');
  }
  const p = page as Record<string, unknown>;
  const unknownKeys = Object.keys(p).filter(
    (k) => k !== 'limit' && k !== 'after' && k !== 'scanLimit',
  );
  if (unknownKeys.length > 0) {
    throw new InvalidInputError(
      'list.page',
      `unknown key(s) ${unknownKeys.join(', ')}; known: limit, after, scanLimit`,
    );
  }
  const limit = integer(p['limit'], 'list.page.limit', DEFAULT_LIMIT, 1, MAX_LIMIT);
  const scan = integer(p['scanLimit'], 'list.page.scanLimit', DEFAULT_SCAN, limit, MAX_SCAN);
  const after = p['after'] === undefined ? null : decodeCursor(p['after'], f);
  return { limit, after, scan };
}

function countOptionsOf(options: unknown): { cap: number; budgetMs: number } {
  if (options === undefined) return { cap: DEFAULT_CAP, budgetMs: DEFAULT_BUDGET_MS };
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidInputError('count.options', 'must be an object { cap?, budgetMs? }');
  }
  const unknownKeys = Object.keys(options).filter((k) => k !== 'cap' && k !== 'budgetMs');
  if (unknownKeys.length > 0) {
    throw new InvalidInputError(
      'count.options',
      `unknown key(s) ${unknownKeys.join(', ')}; known: cap, budgetMs`,
    );
  }
  const o = options as { cap?: unknown; budgetMs?: unknown };
  return {
    cap: integer(o.cap, 'count.options.cap', DEFAULT_CAP, 1, MAX_CAP),
    budgetMs: integer(o.budgetMs, 'count.options.budgetMs', DEFAULT_BUDGET_MS, 1, MAX_BUDGET_MS),
  };
}

function integer(value: unknown, path: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(
      path,
      `must be an integer in ${min}…${max}, got ${JSON.stringify(value) ?? typeof value}`,
    );
  }
  return value;
}

/** A short, stable fingerprint of a resolved filter (a cursor is refused with another one). */
function fingerprint(f: ResolvedFilter): string {
  return createHash('sha256').update(JSON.stringify(f)).digest('base64url').slice(0, 12);
}

function encodeCursor(id: string, f: ResolvedFilter): string {
  return Buffer.from(`${CURSOR_VERSION}:${id}:${fingerprint(f)}`).toString('base64url');
}

function decodeCursor(cursor: unknown, f: ResolvedFilter): string {
  const malformed = (): never => {
    throw new InvalidInputError(
      'list.page.after',
      'is not a cursor: pass the `next` of a previous list() page unchanged',
    );
  };
  if (typeof cursor !== 'string' || cursor.length === 0 || cursor.length > 100) malformed();
  const text = Buffer.from(cursor as string, 'base64url').toString('utf8');
  const [version, id, print, ...rest] = text.split(':');
  if (version !== CURSOR_VERSION || rest.length > 0 || id === undefined || print === undefined) {
    return malformed();
  }
  if (!/^[1-9][0-9]{0,18}$/.test(id) || BigInt(id) > 9_223_372_036_854_775_807n) malformed();
  if (print !== fingerprint(f)) {
    throw new InvalidInputError(
      'list.page.after',
      'was made for another filter: page with the filter that produced it',
    );
  }
  return id;
}
