import { InvalidInputError } from '../errors/invalid-input.error';
import type { DurableStatus } from '../gen-durable.constants';
import type { InstanceFilter } from '../control/instance-filter';

/** The query fields of the instances view (docs/design.md §27.7 filters), as the form sends them. */
export const FILTER_FIELDS = [
  'fsm',
  'status',
  'queue',
  'step',
  'correlationKeyPrefix',
  'parentId',
  'createdAfter',
  'createdBefore',
  'errorContains',
] as const;

export type FilterField = (typeof FILTER_FIELDS)[number];

/** The filter's fields as text (empty ones dropped; `status` may repeat). */
export type FilterFields = Partial<Record<FilterField, string | string[]>>;

/** A filter read from a query or form: the engine's filter and the fields that gave it. */
export interface FilterQuery {
  readonly filter: InstanceFilter;
  readonly fields: FilterFields;
}

const LOCAL_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;

/**
 * Reads the filter fields of a query or form; dates without a zone (a `datetime-local` input)
 * are UTC. A malformed date is an `InvalidInputError` naming the field; the engine checks the rest.
 */
export function filterFromQuery(query: Readonly<Record<string, string | string[]>>): FilterQuery {
  const fields: FilterFields = {};
  const filter: InstanceFilter = {};
  for (const name of FILTER_FIELDS) {
    const raw = query[name];
    const values = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw])
      .map((v) => v.trim())
      .filter((v) => v !== '');
    if (values.length === 0) continue;
    if (name === 'status') {
      fields.status = values;
      filter.status = values as DurableStatus[];
      continue;
    }
    const value = values[0]!;
    fields[name] = value;
    if (name === 'createdAfter' || name === 'createdBefore') filter[name] = dateOf(value, name);
    else if (name === 'fsm') filter.fsm = value;
    else filter[name] = value;
  }
  return { filter, fields };
}

function dateOf(text: string, field: string): Date {
  const date = new Date(LOCAL_DATE_TIME.test(text) ? `${text}Z` : text);
  if (Number.isNaN(date.getTime())) {
    throw new InvalidInputError(
      field,
      `must be a date and time (UTC), got ${JSON.stringify(text)}`,
    );
  }
  return date;
}
