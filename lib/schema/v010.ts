import type { SchemaIncrement } from './schema-increment';

/**
 * Version 10: every object carries the `gen_durable_` prefix, so the engine can share a schema
 * with a host that has its own `signals` table or `durable_status` type (docs/design.md §3.6).
 * Versions 1–9 created the inbox table `signals` (with its identity sequence, primary key,
 * dedup constraint, foreign key and two indexes) and the enum `durable_status` unprefixed; this
 * increment renames them to `gen_durable_status` and `gen_durable_signals…`. Renames touch only the catalog: no row is
 * rewritten and the sequence keeps its value; each takes its object's ACCESS EXCLUSIVE lock for
 * the moment of the rename. Renaming a table or a type also renames its row and array types;
 * renaming a primary-key or unique constraint also renames its index.
 *
 * A migration that builds the schema from nothing through this version never creates the old
 * names: it runs versions 1–9 with `renames` already applied and skips this `up` (and a
 * revert from here to nothing skips this `down`), see lib/schema/migrator.ts.
 */
export const V010: SchemaIncrement = {
  version: 10,
  renames: {
    durable_status: 'gen_durable_status',
    signals: 'gen_durable_signals',
    signals_id_seq: 'gen_durable_signals_id_seq',
    signals_pkey: 'gen_durable_signals_pkey',
    signals_target_dedup: 'gen_durable_signals_target_dedup',
    signals_target_id_fkey: 'gen_durable_signals_target_id_fkey',
    signals_target: 'gen_durable_signals_target',
    signals_inbox: 'gen_durable_signals_inbox',
  },
  up: [
    `ALTER TYPE {schema}.durable_status RENAME TO gen_durable_status`,
    `ALTER TABLE {schema}.signals RENAME TO gen_durable_signals`,
    `ALTER SEQUENCE {schema}.signals_id_seq RENAME TO gen_durable_signals_id_seq`,
    `ALTER TABLE {schema}.gen_durable_signals RENAME CONSTRAINT signals_pkey TO gen_durable_signals_pkey`,
    `ALTER TABLE {schema}.gen_durable_signals
       RENAME CONSTRAINT signals_target_dedup TO gen_durable_signals_target_dedup`,
    `ALTER TABLE {schema}.gen_durable_signals
       RENAME CONSTRAINT signals_target_id_fkey TO gen_durable_signals_target_id_fkey`,
    `ALTER INDEX {schema}.signals_target RENAME TO gen_durable_signals_target`,
    `ALTER INDEX {schema}.signals_inbox RENAME TO gen_durable_signals_inbox`,
  ],
  down: [
    `ALTER INDEX {schema}.gen_durable_signals_inbox RENAME TO signals_inbox`,
    `ALTER INDEX {schema}.gen_durable_signals_target RENAME TO signals_target`,
    `ALTER TABLE {schema}.gen_durable_signals
       RENAME CONSTRAINT gen_durable_signals_target_id_fkey TO signals_target_id_fkey`,
    `ALTER TABLE {schema}.gen_durable_signals
       RENAME CONSTRAINT gen_durable_signals_target_dedup TO signals_target_dedup`,
    `ALTER TABLE {schema}.gen_durable_signals RENAME CONSTRAINT gen_durable_signals_pkey TO signals_pkey`,
    `ALTER SEQUENCE {schema}.gen_durable_signals_id_seq RENAME TO signals_id_seq`,
    `ALTER TABLE {schema}.gen_durable_signals RENAME TO signals`,
    `ALTER TYPE {schema}.gen_durable_status RENAME TO durable_status`,
  ],
};
