import type { SchemaIncrement } from './schema-increment';

/**
 * Version 14: online index builds (docs/schema.md "Online index builds").
 * - `gen_durable_index_builds`: one row per index an increment builds online (`concurrentIndexes`):
 *   when its latest build started and finished, how many attempts, and the error of a failed one.
 *   `verify` and the engine's boot check read it with the catalog's `indisvalid`.
 * - `gen_durable_ended_key`, built online: the ended rows that carry a correlation key, by key
 *   then end time. It serves the second branch of `keyTargetId` (lib/sql/instance.sql.ts: the
 *   most recently ended instance with a key, for GET_INSTANCE_BY_KEY and every action by key),
 *   which without it walks gen_durable_gc over every ended row. Partial on "not live" (written
 *   as that branch writes it) and a non-NULL key, so the happy path writes it once per instance,
 *   when the row ends and only if it has a key (a terminal update is not HOT anyway: it changes
 *   `status` and `updated_at`, which gen_durable_gc holds).
 */
export const V014: SchemaIncrement = {
  version: 14,
  up: [
    `CREATE TABLE {schema}.gen_durable_index_builds (
       name        text PRIMARY KEY,
       version     integer NOT NULL,
       started_at  timestamptz NOT NULL,
       finished_at timestamptz,
       attempts    integer NOT NULL,
       error       text
     )`,
  ],
  down: [`DROP TABLE IF EXISTS {schema}.gen_durable_index_builds`],
  concurrentIndexes: [
    {
      name: 'gen_durable_ended_key',
      on: `{schema}.gen_durable (correlation_key, updated_at)
       WHERE status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
         AND correlation_key IS NOT NULL`,
    },
  ],
};
