import { ALL_STATUSES, type DurableStatus } from '../gen-durable.constants';
import { InvalidInputError } from '../errors/invalid-input.error';
import { isArray } from '../util/is-array';
import { knownKeys, oneOf } from './input-checks';
import type { InstanceView } from '../instance/instance-view';
import type { CappedCount } from '../instance/queue-status';
import type { ResolvedFilter } from '../sql/resolved-filter';

export type { ResolvedFilter };

/**
 * Which instances `list`, `count` (and the bulk actions) address (docs/design.md §27.7). Every
 * field narrows; an empty filter matches every instance. Ranges are half-open: `…After` is
 * inclusive, `…Before` exclusive.
 */
export interface InstanceFilter {
  /** FSM name(s). */
  fsm?: string | readonly string[];
  /** Status(es). */
  status?: DurableStatus | readonly DurableStatus[];
  queue?: string;
  /** Current step name. */
  step?: string;
  /** Exact correlation key (any status: not only the key's current occupant). */
  correlationKey?: string;
  /** Correlation keys starting with this text. */
  correlationKeyPrefix?: string;
  /** Children of this instance. */
  parentId?: string | bigint;
  /** Inserted at or after. */
  createdAfter?: Date;
  /** Inserted before. */
  createdBefore?: Date;
  /** Last changed at or after (a terminal row's end time). */
  updatedAfter?: Date;
  /** Last changed before. */
  updatedBefore?: Date;
  /** `lastError` contains this text (case-sensitive). */
  errorContains?: string;
}

/** A page request of `list`. */
export interface ListPage {
  /** Items per page, 1…1 000. Default 50. */
  limit?: number;
  /** The `next` cursor of the previous page of the same filter. */
  after?: string;
  /**
   * Rows examined at most by this call, `limit`…100 000. Default 10 000. A filter its driving
   * index does not serve entirely may return a short page with a `next` cursor: call again.
   */
  scanLimit?: number;
}

/** One page of `list`: items newest first (by id), and the cursor of the next page if any. */
export interface ListResult {
  readonly items: InstanceView[];
  /** Absent on the last page. */
  readonly next?: string;
}

/** The options of `count`. */
export interface CountOptions {
  /** Matches counted at most, 1…1 000 000. Default 10 000. */
  cap?: number;
  /**
   * Milliseconds the count may read rows for, 1…60 000. Default 1 000. A count that has not
   * found `cap` matches nor read all candidate rows by then stops and answers `exact: false`.
   */
  budgetMs?: number;
}

/**
 * What `count` answers (docs/design.md §27.7): `count` matches, at most the cap. `capped: true`
 * means the count reached the cap (there are at least `count`); `exact: false` means it ran out
 * of its time budget first (there are at least `count`, maybe more — a lower bound, not 0 for
 * "unknown"). A count that read every candidate row is `{ count, capped: false, exact: true }`;
 * a capped count is exact about what it says (`exact: true`).
 */
export interface InstanceCount extends CappedCount {
  readonly exact: boolean;
}

const FILTER_KEYS = [
  'fsm',
  'status',
  'queue',
  'step',
  'correlationKey',
  'correlationKeyPrefix',
  'parentId',
  'createdAfter',
  'createdBefore',
  'updatedAfter',
  'updatedBefore',
  'errorContains',
];

/**
 * Validates a caller's filter into a {@link ResolvedFilter}; anything malformed (an unknown
 * key, an unknown status, an empty name, an invalid date or id) is an `InvalidInputError`
 * naming `path.<field>`.
 */
export function resolveInstanceFilter(filter: unknown, path: string): ResolvedFilter {
  if (filter === undefined) filter = {};
  if (typeof filter !== 'object' || filter === null || isArray(filter)) {
    throw new InvalidInputError(
      path,
      'must be an object (an InstanceFilter; {} matches every instance)',
    );
  }
  knownKeys(filter, FILTER_KEYS, path);
  const f = filter as Record<string, unknown>;
  return {
    fsms: textList(f['fsm'], `${path}.fsm`),
    statuses: statusList(f['status'], `${path}.status`),
    queue: text(f['queue'], `${path}.queue`),
    step: text(f['step'], `${path}.step`),
    correlationKey: text(f['correlationKey'], `${path}.correlationKey`),
    correlationKeyPrefix: text(f['correlationKeyPrefix'], `${path}.correlationKeyPrefix`),
    parentId: id(f['parentId'], `${path}.parentId`),
    createdAfter: date(f['createdAfter'], `${path}.createdAfter`),
    createdBefore: date(f['createdBefore'], `${path}.createdBefore`),
    updatedAfter: date(f['updatedAfter'], `${path}.updatedAfter`),
    updatedBefore: date(f['updatedBefore'], `${path}.updatedBefore`),
    errorContains: text(f['errorContains'], `${path}.errorContains`),
  };
}

/** True when the filter narrows by nothing. */
export function isEmptyFilter(f: ResolvedFilter): boolean {
  return Object.values(f).every((v) => v === null);
}

function text(value: unknown, path: string): string | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidInputError(path, 'must be a non-empty string');
  }
  return value;
}

function textList(value: unknown, path: string): string[] | null {
  if (value === undefined) return null;
  const list: unknown[] = isArray(value) ? [...(value as unknown[])] : [value];
  if (list.length === 0) throw new InvalidInputError(path, 'must not be an empty array');
  return list.map((v, i) => text(v, isArray(value) ? `${path}[${i}]` : path) as string);
}

function statusList(value: unknown, path: string): DurableStatus[] | null {
  const list = textList(value, path);
  if (list === null) return null;
  for (const s of list) oneOf(s, ALL_STATUSES, path);
  return [...new Set(list)] as DurableStatus[];
}

function id(value: unknown, path: string): string | null {
  if (value === undefined) return null;
  const t = typeof value === 'bigint' ? value.toString() : value;
  if (typeof t !== 'string' || !/^[1-9][0-9]{0,18}$/.test(t) || BigInt(t) > MAX_BIGINT) {
    throw new InvalidInputError(path, 'must be a positive bigint id (string or bigint)');
  }
  return t;
}

const MAX_BIGINT = 9_223_372_036_854_775_807n;

function date(value: unknown, path: string): Date | null {
  if (value === undefined) return null;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new InvalidInputError(path, 'must be a valid Date');
  }
  return value;
}
