import type { SchemaIncrement } from './schema-increment';

/**
 * Version 2: `signaled`, true once the row was sent a signal. The delivery statement sets it
 * in the update that locks the target first (docs/design.md §26.6), so it costs no extra write there; a
 * trigger on `signals` sets it for any other writer (a node of the previous release during a
 * rolling deploy, a hand-written insert), finding it already set after an engine delivery. A
 * flush reads it from the rows it updates, under their row locks: a terminal row never
 * signaled has an empty inbox, so its flush skips the inbox sweep, and a flush with no other
 * rider is one autocommit statement; the claim probes the inbox of signaled rows only
 * (docs/performance.md). Rows that already hold signals are marked when the column is added.
 */
export const V002: SchemaIncrement = {
  version: 2,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN signaled boolean NOT NULL DEFAULT false`,
    `UPDATE {schema}.gen_durable g SET signaled = true WHERE EXISTS (SELECT 1 FROM {schema}.signals s WHERE s.target_id = g.id)`,
    `CREATE FUNCTION {schema}.gen_durable_mark_signaled() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       UPDATE {schema}.gen_durable SET signaled = true WHERE id = NEW.target_id AND NOT signaled;
       RETURN NULL;
     END
     $$`,
    `CREATE TRIGGER gen_durable_mark_signaled AFTER INSERT ON {schema}.signals
       FOR EACH ROW EXECUTE FUNCTION {schema}.gen_durable_mark_signaled()`,
  ],
  down: [
    `DROP TRIGGER IF EXISTS gen_durable_mark_signaled ON {schema}.signals`,
    `DROP FUNCTION IF EXISTS {schema}.gen_durable_mark_signaled()`,
    `ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS signaled`,
  ],
};
