import type { PoolClient } from 'pg';

import { DuplicateError } from '../errors/duplicate.error';
import type { InsertRow } from '../instance/insert-row';
import { INSERT_INSTANCE, INSERT_INSTANCE_OR_HOLDER } from '../sql/insert.sql';
import { GET_KEY_OCCUPANT } from '../sql/instance.sql';
import type { StatementRunner } from '../sql/statement';

/** What one insert answered: the id, and for a row this call inserted, its queue and dueness. */
export interface InsertAnswer {
  readonly id: string;
  /** False when `onConflict: 'return'` answered the key's holder instead. */
  readonly inserted: boolean;
  readonly queue: string;
  readonly due: boolean;
}

/**
 * Inserts one validated row (docs/design.md §2.5): INSERT_INSTANCE, `DuplicateError` on an
 * occupied key; or, with `holder` (`onConflict: 'return'` with a key), INSERT_INSTANCE_OR_HOLDER:
 * one statement inserts or names the key's holder. When the holder committed after that
 * statement's snapshot (a concurrent insert of the same key), it is looked up once more by key;
 * a holder that has already left the key's scope lets the insert be tried again, once. Shared by
 * `EngineService.insert` and `GenDurableClient.insert`; the caller pokes after commit.
 */
export async function insertInstance(
  sql: StatementRunner,
  row: InsertRow,
  holder: boolean,
  client?: PoolClient,
): Promise<InsertAnswer> {
  if (!holder) {
    const inserted = await INSERT_INSTANCE.run(sql, row, client);
    if (!inserted) throw new DuplicateError(row.correlationKey ?? '');
    return { ...inserted, inserted: true };
  }
  const key = row.correlationKey ?? '';
  for (let attempt = 1; attempt <= 2; attempt++) {
    const answer = await INSERT_INSTANCE_OR_HOLDER.run(sql, row, client);
    if (answer) return answer;
    const current = await GET_KEY_OCCUPANT.run(sql, { correlationKey: key }, client);
    if (current) return { id: current.id, inserted: false, queue: current.queue, due: false };
  }
  throw new DuplicateError(key);
}
