import type { PoolClient } from 'pg';

import { DuplicateError } from '../errors/duplicate.error';
import type { InsertConflict } from '../instance/insert-conflict';
import type { InsertRow } from '../instance/insert-row';
import { INSERT_OR_DEBOUNCE } from '../sql/debounce.sql';
import { INSERT_INSTANCE, INSERT_INSTANCE_OR_HOLDER } from '../sql/insert.sql';
import { GET_KEY_OCCUPANT } from '../sql/instance.sql';
import type { ControlRuntime } from './control-runtime';
import { replaceInstance } from './replace-instance';

/** What one insert answered: the id, and for a row this call wrote, its queue and dueness. */
export interface InsertAnswer {
  readonly id: string;
  /** False when the key's holder was answered instead (`'skip'`, a started debounce occupant) or debounced. */
  readonly inserted: boolean;
  /** True when `onConflict: 'debounce'` moved the occupant (it took the new state). */
  readonly debounced: boolean;
  readonly queue: string;
  readonly due: boolean;
}

/** Attempts of a debounce or skip whose holder committed after its statement's snapshot. */
const ATTEMPTS = 3;

/**
 * Inserts one validated row (docs/design.md §2.5, docs/identity.md "Conflict modes") by
 * `conflict`: `'error'`, INSERT_INSTANCE, `DuplicateError` on an occupied key; `'skip'`,
 * INSERT_INSTANCE_OR_HOLDER: one statement inserts or names the key's holder; `'debounce'`,
 * INSERT_OR_DEBOUNCE: one statement inserts, debounces the never-started occupant, or names
 * the holder; `'replace'`, {@link replaceInstance}. A row without a key is a plain insert. When
 * the holder committed after the statement's snapshot (a concurrent insert of the same key),
 * `'skip'` looks it up once more by key and `'debounce'` runs its statement again; a holder
 * that has already left the key's scope lets the insert be tried again. Shared by
 * `EngineService.insert` and `GenDurableClient.insert`; the caller pokes after commit.
 */
export async function insertInstance(
  runtime: ControlRuntime,
  row: InsertRow,
  conflict: InsertConflict,
  client?: PoolClient,
): Promise<InsertAnswer> {
  const sql = runtime.sql;
  const key = row.correlationKey;
  if (key === null || conflict.mode === 'error') {
    const inserted = await INSERT_INSTANCE.run(sql, row, client);
    if (!inserted) throw new DuplicateError(key ?? '');
    return { ...inserted, inserted: true, debounced: false };
  }
  if (conflict.mode === 'replace') {
    return { ...(await replaceInstance(runtime, row, client)), inserted: true, debounced: false };
  }
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    if (conflict.mode === 'debounce') {
      const answer = await INSERT_OR_DEBOUNCE.run(
        sql,
        { row, debounceMs: conflict.debounceMs, maxDelayMs: conflict.maxDelayMs },
        client,
      );
      if (answer) {
        return {
          id: answer.id,
          queue: answer.queue,
          due: answer.due,
          inserted: answer.outcome === 'inserted',
          debounced: answer.outcome === 'debounced',
        };
      }
      continue;
    }
    const answer = await INSERT_INSTANCE_OR_HOLDER.run(sql, row, client);
    if (answer) return { ...answer, debounced: false };
    const current = await GET_KEY_OCCUPANT.run(sql, { correlationKey: key }, client);
    if (current) {
      return {
        id: current.id,
        inserted: false,
        debounced: false,
        queue: current.queue,
        due: false,
      };
    }
  }
  throw new DuplicateError(key);
}
