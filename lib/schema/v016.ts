import type { SchemaIncrement } from './schema-increment';

/**
 * Version 16: strict order per key (docs/sequences.md).
 * - `sequence_key`: the instance's sequence key (`insert({ sequenceKey })`); NULL = none.
 * - `on_head_failure`: `'block'` or `'skip'`, what the row does to its key once it has failed
 *   (NULL on a row without a sequence key).
 * - `gen_durable_sequence`: the rows that hold their key: live ones, and failed ones whose policy
 *   is `'block'`. CLAIM_RUNNABLE probes it (`LIMIT 1`, an older id of the candidate's key) only
 *   for a candidate with a key; SEQUENCE_HEADS reads it for `blockedSequences`. Rows without a
 *   key are not in it, so plain rows pay no index write.
 * Nullable columns without a default rewrite nothing; the index is built over no row.
 */
export const V016: SchemaIncrement = {
  version: 16,
  up: [
    `ALTER TABLE {schema}.gen_durable ADD COLUMN sequence_key text,
       ADD COLUMN on_head_failure text,
       ADD CONSTRAINT gen_durable_on_head_failure_check
         CHECK (on_head_failure IN ('block', 'skip'))`,
    `CREATE INDEX gen_durable_sequence ON {schema}.gen_durable (sequence_key, id)
       WHERE sequence_key IS NOT NULL
         AND (status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
              OR (status = 'failed' AND on_head_failure = 'block'))`,
  ],
  down: [
    `DROP INDEX IF EXISTS {schema}.gen_durable_sequence`,
    `ALTER TABLE {schema}.gen_durable DROP CONSTRAINT IF EXISTS gen_durable_on_head_failure_check,
       DROP COLUMN IF EXISTS sequence_key, DROP COLUMN IF EXISTS on_head_failure`,
  ],
};
