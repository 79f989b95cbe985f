import type { SchemaIncrement } from './schema-increment';

/**
 * Version 2: `signaled`, set by every signal delivery (the delivery already updates the target
 * row first, SPEC §26.6, so the flag costs no extra write). A flush reads it from the rows it
 * updates, under their row locks: a terminal row never signaled has an empty inbox, so its
 * flush skips the inbox sweep, and a flush with no other rider is one autocommit statement
 * (docs/performance.md). Rows that already hold signals are marked when the column is added.
 */
export const V002: SchemaIncrement = {
  version: 2,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN signaled boolean NOT NULL DEFAULT false`,
    `UPDATE {schema}.gen_durable g SET signaled = true WHERE EXISTS (SELECT 1 FROM {schema}.signals s WHERE s.target_id = g.id)`,
  ],
  down: [`ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS signaled`],
};
