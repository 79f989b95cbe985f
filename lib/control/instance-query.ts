import { createHash } from 'node:crypto';

import { InvalidInputError } from '../errors/invalid-input.error';
import {
  type InstanceCount,
  type ListResult,
  resolveInstanceFilter,
  type ResolvedFilter,
} from './instance-filter';
import type { StatementRunner } from '../sql/statement';
import { integerIn, optionsObject } from './input-checks';
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
  const p = optionsObject(page, ['limit', 'after', 'scanLimit'], 'list.page', {
    nameKey: false,
    shape: '{ limit?, after?, scanLimit? }',
  });
  const limit = integerIn(p?.['limit'], 'list.page.limit', DEFAULT_LIMIT, 1, MAX_LIMIT);
  const scan = integerIn(p?.['scanLimit'], 'list.page.scanLimit', DEFAULT_SCAN, limit, MAX_SCAN);
  const after = p?.['after'] === undefined ? null : decodeCursor(p['after'], f);
  return { limit, after, scan };
}

function countOptionsOf(options: unknown): { cap: number; budgetMs: number } {
  const o = optionsObject(options, ['cap', 'budgetMs'], 'count.options', {
    nameKey: false,
    shape: '{ cap?, budgetMs? }',
  });
  return {
    cap: integerIn(o?.['cap'], 'count.options.cap', DEFAULT_CAP, 1, MAX_CAP),
    budgetMs: integerIn(
      o?.['budgetMs'],
      'count.options.budgetMs',
      DEFAULT_BUDGET_MS,
      1,
      MAX_BUDGET_MS,
    ),
  };
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
