import type { SchemaIncrement } from './schema-increment';

/**
 * Version 12: instance deadlines (docs/operations-control.md "Instance deadlines").
 * - `deadline_at`: when a live instance is ended (cancelled, or routed to its FSM's
 *   `onDeadline` step); NULL = none. Set at insert (`insert({ deadline | deadlineInMs })`, or
 *   the FSM's `@DurableFsm({ deadlineMs })`); cleared when the instance is routed.
 * - `gen_durable_deadline`: the maintenance sweep's scan of due deadlines (DUE_INSTANCE_DEADLINES),
 *   partial, so only live rows with a deadline are in it.
 * A nullable column without a default rewrites nothing; the index is built over no row.
 */
export const V012: SchemaIncrement = {
  version: 12,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN deadline_at timestamptz`,
    `CREATE INDEX gen_durable_deadline ON {schema}.gen_durable (deadline_at)
       WHERE deadline_at IS NOT NULL
         AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`,
  ],
  down: [
    `DROP INDEX IF EXISTS {schema}.gen_durable_deadline`,
    `ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS deadline_at`,
  ],
};
