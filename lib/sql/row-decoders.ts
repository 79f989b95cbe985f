/**
 * Row decoders shared by several statements. Each is a plain loop over the raw rows (no
 * per-row spread, no intermediate arrays): several run on the drain's hot path.
 */

/** A statement whose rows nobody reads. */
export function noRows(): void {
  return undefined;
}

/** A statement read for its affected-row count. */
export function affectedRows(_rows: readonly unknown[], _input: unknown, rowCount: number): number {
  return rowCount;
}

/** The raw rows as they are: the statement's columns already are the result's fields. */
export function asRows<Raw>(rows: readonly Raw[]): readonly Raw[] {
  return rows;
}

/** The `id` column of every row, in row order. */
export function idsOf(rows: readonly { readonly id: string }[]): string[] {
  const ids: string[] = [];
  for (let i = 0; i < rows.length; i++) ids[i] = rows[i]!.id;
  return ids;
}

/** A row id and its queue (rows made runnable: their queues get poked). */
export interface IdQueue {
  readonly id: string;
  readonly queue: string;
}

/** A row id, its queue and its status after the statement. */
export interface IdQueueStatus extends IdQueue {
  readonly status: string;
}

/** The most distinct names {@link internedName} keeps; past it, names are answered as given. */
const INTERNED_NAMES_MAX = 4096;
const internedNames = new Map<string, string>();

/**
 * One string for every equal FSM, step or queue name a decoder reads: `pg` makes a new string
 * per row and column, and a claimed row keeps its names while it waits in the buffer. The set
 * of names is the registered FSMs' and the queues' (bounded; past INTERNED_NAMES_MAX distinct
 * names, new ones are not kept).
 */
export function internedName(name: string): string {
  const known = internedNames.get(name);
  if (known !== undefined) return known;
  if (internedNames.size < INTERNED_NAMES_MAX) internedNames.set(name, name);
  return name;
}
