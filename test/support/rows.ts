import type { Pool, PoolClient } from 'pg';

/**
 * Inserts one row of gen_durable straight into `status` (an `awaiting_children` row with one
 * child pending), its `updated_at` `ageMs` in the past: the ended or parked rows GC, the archive
 * and their specs read, without running an FSM. Answers its id.
 */
export async function insertRowInStatus(
  pool: Pool,
  row: {
    readonly status: string;
    readonly ageMs: number;
    readonly parentId?: string | null;
    readonly fsm: string;
    readonly step?: string;
    readonly queue: string;
  },
): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO gen_durable (fsm, step, queue, status, parent_id, children_pending, updated_at)
     VALUES ($4, $5, $6, $1::gen_durable_status, $2,
             CASE WHEN $1::text = 'awaiting_children' THEN 1 ELSE 0 END,
             now() - make_interval(secs => $3::float8 / 1000))
     RETURNING id`,
    [row.status, row.parentId ?? null, row.ageMs, row.fsm, row.step ?? 'start', row.queue],
  );
  return rows[0]!.id;
}

/**
 * Pins the xmin horizon of `pool`'s database: a connection in a REPEATABLE READ transaction that
 * took an XID, held until {@link unpinHorizon} (a forgotten `BEGIN` after a write). Row versions
 * that die after it cannot be pruned, nor their index entries marked dead.
 */
export async function pinHorizon(pool: Pool): Promise<PoolClient> {
  const pin = await pool.connect();
  await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await pin.query('SELECT txid_current()');
  return pin;
}

/** Ends the pin of {@link pinHorizon} and returns its connection. */
export async function unpinHorizon(pin: PoolClient): Promise<void> {
  await pin.query('ROLLBACK');
  pin.release();
}
