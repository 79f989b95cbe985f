import type { SqlExecutor } from '../db/sql-executor';
import { FAIR_HEADS_DELETE, FAIR_HEADS_LOCK_IDLE, type FairHead } from '../sql/fairness.sql';

/** Where the first page starts: before every (queue, key) (both are non-empty texts). */
const START: FairHead = { queue: '', key: '' };

/**
 * The fairness heads' share of a GC sweep (docs/many-tenants.md "Fair claims by key"): walks
 * gen_durable_fair_keys in pages of `batch` heads (keyset on its primary key) and deletes the
 * heads whose key has no live row left in its queue (every row ended, was purged, or moved),
 * which otherwise accumulate, one per key ever seen. Each page is one transaction of two
 * statements: FAIR_HEADS_LOCK_IDLE locks the candidates (SKIP LOCKED: a head an inserter or a
 * claim holds is left alone), then FAIR_HEADS_DELETE checks them again in a snapshot taken after
 * the locks, so a row that entered the key before the lock keeps its head, and one inserted
 * after it makes its trigger create the head again once this transaction commits. One pass a
 * sweep, from the first head to the last (or until `stopping()`); answers the heads deleted.
 */
export async function sweepFairHeads(
  sql: SqlExecutor,
  batch: number,
  stopping: () => boolean,
): Promise<number> {
  let after = START;
  let deleted = 0;
  for (;;) {
    const page = await sql.transaction(async (tx) => {
      const found = await FAIR_HEADS_LOCK_IDLE.run(sql, { after, limit: batch }, tx);
      const gone =
        found.idle.length === 0 ? [] : await FAIR_HEADS_DELETE.run(sql, { heads: found.idle }, tx);
      return { last: found.last, scanned: found.scanned, deleted: gone.length };
    });
    deleted += page.deleted;
    if (page.last === null || page.scanned < batch || stopping()) return deleted;
    after = page.last;
  }
}
