import type { SchemaIncrement } from './schema-increment';

/**
 * Version 13: durable streams (docs/streams.md).
 * - `gen_durable_streams`: the chunks a step appended with `ctx.stream(name).write(chunk)`, one
 *   row per chunk. `seq` is the chunk's offset in its stream: dense from 0, assigned when the
 *   append commits, in the order the writes were made. `claim_seq` is the claim of the step
 *   run that wrote it. The primary key `(instance_id, name, seq)` serves the readers' range
 *   scans and the cascade's lookup.
 * - `gen_durable_stream_heads`: one row per stream, the serialization point of its appends:
 *   `next_seq` (how many chunks it holds: the next offset), `claim_seq` (the newest claim that
 *   appended: an older one is refused) and `batch` (the token of the statement that appended
 *   last, so a retried append that had committed is recognised and not applied twice).
 * Both reference the instance with ON DELETE CASCADE, as the inbox and the history do: GC and
 * purge take an instance's streams with it. New tables: nothing is rewritten.
 */
export const V013: SchemaIncrement = {
  version: 13,
  up: [
    `CREATE TABLE {schema}.gen_durable_stream_heads (
       instance_id bigint NOT NULL REFERENCES {schema}.gen_durable (id) ON DELETE CASCADE,
       name        text NOT NULL,
       next_seq    bigint NOT NULL,
       claim_seq   bigint NOT NULL,
       batch       text NOT NULL,
       updated_at  timestamptz NOT NULL DEFAULT now(),
       CONSTRAINT gen_durable_stream_heads_pkey PRIMARY KEY (instance_id, name)
     )`,
    `CREATE TABLE {schema}.gen_durable_streams (
       instance_id bigint NOT NULL REFERENCES {schema}.gen_durable (id) ON DELETE CASCADE,
       name        text NOT NULL,
       seq         bigint NOT NULL,
       chunk       jsonb NOT NULL,
       claim_seq   bigint NOT NULL,
       created_at  timestamptz NOT NULL DEFAULT now(),
       CONSTRAINT gen_durable_streams_pkey PRIMARY KEY (instance_id, name, seq)
     )`,
  ],
  down: [
    `DROP TABLE IF EXISTS {schema}.gen_durable_streams`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_stream_heads`,
  ],
};
