import type { SchemaIncrement } from './schema-increment';

/**
 * Version 5: cancellation (docs/design.md §27.1–27.2).
 * - `cancel_requested_at` / `cancel_reason`: a cooperative cancel of an executing row is stored
 *   on the row (the heartbeat hands it back to the owner; the owner's flush and the reaper turn
 *   the row `cancelled`); a cancelled row keeps both. Nullable, no default: adding them
 *   rewrites nothing.
 * - `gen_durable_gc` covers every terminal status. Its predicate is written as "not live" so it
 *   never names `cancelled` (added by version 4, possibly in this same transaction); GC's
 *   statements write exactly this predicate. Rebuilding the index scans the table once.
 */
export const V005: SchemaIncrement = {
  version: 5,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN cancel_requested_at timestamptz,
       ADD COLUMN cancel_reason text`,
    `DROP INDEX {schema}.gen_durable_gc`,
    `CREATE INDEX gen_durable_gc ON {schema}.gen_durable (updated_at)
       WHERE status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`,
  ],
  down: [
    // A cancelled row becomes failed, its reason as the error (text compare: no enum literal).
    `UPDATE {schema}.gen_durable
        SET status = 'failed', last_error = 'cancelled' || COALESCE(': ' || cancel_reason, '')
      WHERE status::text = 'cancelled'`,
    `DROP INDEX IF EXISTS {schema}.gen_durable_gc`,
    `CREATE INDEX gen_durable_gc ON {schema}.gen_durable (updated_at)
       WHERE status IN ('done', 'failed')`,
    `ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS cancel_requested_at,
       DROP COLUMN IF EXISTS cancel_reason`,
  ],
};
