import type { SchemaIncrement } from './schema-increment';

/**
 * Version 6: cron schedules (docs/design.md §29). One row per schedule, declared by
 * `@DurableCron` (`declared`) or by `engine.schedules.upsert`. A fire advances `next_fire_at`
 * by compare-and-set on its expected value (and `definition_hash`) and inserts the instance from
 * that update's result, so two nodes firing the same occurrence fire it once.
 * `definition_hash` covers every field that shapes a fire; a boot upsert recomputes
 * `next_fire_at` only when it differs. `options` holds `maxCatchup`, `queue`, `priority` and
 * whether the state comes from a function of the declaring class. A new table: nothing
 * rewritten.
 */
export const V006: SchemaIncrement = {
  version: 6,
  up: [
    `CREATE TABLE {schema}.gen_durable_schedules (
       name            text PRIMARY KEY,
       fsm             text NOT NULL,
       cron            text NOT NULL,
       tz              text NOT NULL DEFAULT 'UTC',
       next_fire_at    timestamptz NOT NULL,
       last_fire_at    timestamptz,
       paused          boolean NOT NULL DEFAULT false,
       missed          text NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'once', 'all')),
       overlap         text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('skip', 'allow')),
       state           jsonb NOT NULL DEFAULT '{}'::jsonb,
       options         jsonb NOT NULL DEFAULT '{}'::jsonb,
       definition_hash text NOT NULL,
       declared        boolean NOT NULL DEFAULT false,
       updated_at      timestamptz NOT NULL DEFAULT now(),
       CONSTRAINT gen_durable_schedules_state_is_object CHECK (jsonb_typeof(state) = 'object'),
       CONSTRAINT gen_durable_schedules_options_is_object CHECK (jsonb_typeof(options) = 'object')
     )`,
    // The ticker's read: un-paused schedules in next-fire order (CRON_DUE_SCHEDULES).
    `CREATE INDEX gen_durable_schedules_due ON {schema}.gen_durable_schedules (next_fire_at)
       WHERE NOT paused`,
  ],
  down: [`DROP TABLE IF EXISTS {schema}.gen_durable_schedules`],
};
