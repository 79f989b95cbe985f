import type { SchemaIncrement } from './schema-increment';

/**
 * Version 11: flow control (docs/identity.md "Dedup windows", docs/operations-control.md "Hold
 * and release").
 * - `held_at`, `held_reason`: a held instance is never claimed (CLAIM_RUNNABLE filters it out
 *   of its scan of gen_durable_pick); it still takes signals. NULL = not held.
 * - `dedup_until`: the end of the key's dedup window (`insert({ dedupWindowMs })`): until
 *   then no other instance with the row's correlation key is inserted, whatever its status.
 * - `gen_durable_dedup`: the inserts' probe for an open window on a key, partial, so only rows
 *   inserted with a window are in it.
 * Nullable columns without a default rewrite nothing; the index is built over the rows that
 * have a window, none at the time of this migration.
 */
export const V011: SchemaIncrement = {
  version: 11,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN held_at timestamptz,
       ADD COLUMN held_reason text, ADD COLUMN dedup_until timestamptz`,
    `CREATE INDEX gen_durable_dedup ON {schema}.gen_durable (correlation_key, dedup_until)
       WHERE dedup_until IS NOT NULL`,
  ],
  down: [
    `DROP INDEX IF EXISTS {schema}.gen_durable_dedup`,
    `ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS held_at,
       DROP COLUMN IF EXISTS held_reason, DROP COLUMN IF EXISTS dedup_until`,
  ],
};
