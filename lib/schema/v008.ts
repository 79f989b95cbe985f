import type { SchemaIncrement } from './schema-increment';

/**
 * Version 8, instance control (docs/design.md §27.6–27.7):
 * - `gen_durable_paused_queues`, the fleet-wide queue pause: one row per paused queue (resume
 *   deletes it), so an unpaused queue has no row and the claim's pause probe is one
 *   primary-key miss on a table of a few rows.
 * - `gen_durable_failed`, failed rows by id, for `list` / `count` of failed instances (the
 *   default failure view, newest first, keyset by id). Partial on `status = 'failed'`, so a
 *   row enters it once, when it fails: the happy path (runnable → executing → done) never
 *   writes it, and `status` is already in other indexes' predicates, so no update that was
 *   HOT stops being HOT. Building it scans the table once under a SHARE lock (writes wait):
 *   on a large table, build it first with `CREATE INDEX CONCURRENTLY gen_durable_failed ON
 *   … (id) WHERE status = 'failed'` and the increment finds it (IF NOT EXISTS).
 * Nothing on `gen_durable` is rewritten.
 */
export const V008: SchemaIncrement = {
  version: 8,
  up: [
    `CREATE TABLE {schema}.gen_durable_paused_queues (
       queue     text PRIMARY KEY,
       reason    text,
       paused_at timestamptz NOT NULL DEFAULT now()
     )`,
    `CREATE INDEX IF NOT EXISTS gen_durable_failed ON {schema}.gen_durable (id)
       WHERE status = 'failed'`,
  ],
  down: [
    `DROP INDEX IF EXISTS {schema}.gen_durable_failed`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_paused_queues`,
  ],
};
