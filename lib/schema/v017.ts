import type { SchemaIncrement } from './schema-increment';

/** The columns of `gen_durable` an insert may write (all but the generated ones), at v013. */
const INSTANCE_COLUMNS = `id, fsm, fsm_version, step, status, state, result, last_error, attempt,
  awaits, await_deadline, queue, priority, eligible_at, concurrency_key, concurrency_shard,
  rate_limit, weight, locked_by, lease_expires_at, parent_id, children_pending, correlation_key,
  correlation_scope, claim_seq, reaps, inserted_at, updated_at, signaled, started_seq,
  cancel_requested_at, cancel_reason, suspect, progress, progress_at, forked_from, trace_context,
  held_at, held_reason, dedup_until, deadline_at`;

const HISTORY_COLUMNS = `id, instance_id, at, kind, step, next_step, attempt, claim_seq, worker,
  outcome, error, state, actor`;

const STREAM_COLUMNS = `instance_id, name, seq, chunk, claim_seq, created_at`;

/**
 * Version 17: the archive (docs/archive.md). Ended rows leave the hot table.
 * - `gen_durable_archive`: the columns of `gen_durable` (LIKE: the generated columns become plain
 *   ones, holding the values they had) plus `expires_at`, the moment the row's retention ends
 *   (its end + the retention of its status and FSM, fixed when it is archived). Partitioned by
 *   RANGE on `expires_at`: retention is a `DROP` of each partition whose upper bound has passed,
 *   and per-status and per-FSM retention hold with no row delete, to the partition's grain.
 *   The sweep archives `done` rows only (the CHECK admits `cancelled` too): `failed` and
 *   `cancelled` rows stay in the hot table, where `retry`, `fork` and `replace` act on them.
 * - `gen_durable_history_archive`, `gen_durable_streams_archive`: an archived instance's history
 *   and stream chunks, partitioned alike (same bounds, dropped together). Its inbox and stream
 *   heads are not kept: the hot rows' ON DELETE CASCADE takes them.
 * - `gen_durable_archive_partitions`: the bounds of the partitions that exist (each range names
 *   three partitions, one per archive table), written by `gen_durable_archive_extend` and
 *   `gen_durable_archive_drop`, the two maintenance functions (lib/sql/archive.sql.ts).
 * - The views `gen_durable_all`, `gen_durable_history_all`, `gen_durable_streams_all`: hot rows
 *   UNION ALL archived ones, what every read API reads (an instance is in exactly one of them:
 *   it is moved by one statement).
 * New tables, no partition yet (maintenance creates them), nothing rewritten, no row moved:
 * the GC sweep moves the existing ended rows afterwards, in batches (docs/archive.md).
 */
export const V017: SchemaIncrement = {
  version: 17,
  up: [
    `CREATE TABLE {schema}.gen_durable_archive (
       LIKE {schema}.gen_durable,
       expires_at timestamptz NOT NULL,
       -- done or cancelled, written without 'cancelled' (added by v004 in the same transaction
       -- when the schema is built from nothing: a new enum value is unusable there)
       CONSTRAINT gen_durable_archive_ended CHECK (
         status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children', 'failed'))
     ) PARTITION BY RANGE (expires_at)`,
    // get by id, list's `scan` driver (id order).
    `CREATE INDEX gen_durable_archive_id ON {schema}.gen_durable_archive (id)`,
    // list's `parent` driver, children enrichment of an archived parent.
    `CREATE INDEX gen_durable_archive_parent ON {schema}.gen_durable_archive (parent_id)
       WHERE parent_id IS NOT NULL`,
    // get/history by key: the most recent ended instance with the key (keyTargetId).
    `CREATE INDEX gen_durable_archive_key ON {schema}.gen_durable_archive (correlation_key, updated_at)
       WHERE correlation_key IS NOT NULL`,
    `CREATE TABLE {schema}.gen_durable_history_archive (
       LIKE {schema}.gen_durable_history,
       expires_at timestamptz NOT NULL
     ) PARTITION BY RANGE (expires_at)`,
    `CREATE INDEX gen_durable_history_archive_instance
       ON {schema}.gen_durable_history_archive (instance_id, id)`,
    `CREATE TABLE {schema}.gen_durable_streams_archive (
       LIKE {schema}.gen_durable_streams,
       expires_at timestamptz NOT NULL
     ) PARTITION BY RANGE (expires_at)`,
    `CREATE INDEX gen_durable_streams_archive_read
       ON {schema}.gen_durable_streams_archive (instance_id, name, seq)`,
    `CREATE TABLE {schema}.gen_durable_archive_partitions (
       suffix  text PRIMARY KEY,
       from_at timestamptz NOT NULL,
       to_at   timestamptz NOT NULL,
       CONSTRAINT gen_durable_archive_partitions_range CHECK (from_at < to_at)
     )`,
    `CREATE VIEW {schema}.gen_durable_all AS
       SELECT g.*, NULL::timestamptz AS expires_at FROM {schema}.gen_durable g
       UNION ALL
       SELECT a.* FROM {schema}.gen_durable_archive a`,
    `CREATE VIEW {schema}.gen_durable_history_all AS
       SELECT h.*, NULL::timestamptz AS expires_at FROM {schema}.gen_durable_history h
       UNION ALL
       SELECT a.* FROM {schema}.gen_durable_history_archive a`,
    `CREATE VIEW {schema}.gen_durable_streams_all AS
       SELECT s.*, NULL::timestamptz AS expires_at FROM {schema}.gen_durable_streams s
       UNION ALL
       SELECT a.* FROM {schema}.gen_durable_streams_archive a`,
    // Creates the partitions covering [the start of `grain` holding now(), upto): one range per
    // `grain` ('hour' or 'day', UTC), skipping what exists (a range never overlaps an existing
    // one, so a changed grain fits around the old partitions). Serialized by a lock on
    // the registry (SHARE ROW EXCLUSIVE: its readers go on). Answers the ranges made.
    `CREATE FUNCTION {schema}.gen_durable_archive_extend(upto timestamptz, grain text)
       RETURNS integer LANGUAGE plpgsql AS $$
     DECLARE
       s timestamptz := date_trunc(grain, now(), 'UTC');
       e timestamptz;
       taken timestamptz;
       suffix text;
       made integer := 0;
     BEGIN
       IF grain NOT IN ('hour', 'day') THEN
         RAISE EXCEPTION 'gen_durable_archive_extend: grain must be hour or day, got %', grain;
       END IF;
       LOCK TABLE {schema}.gen_durable_archive_partitions IN SHARE ROW EXCLUSIVE MODE;
       WHILE s < upto LOOP
         SELECT max(p.to_at) INTO taken FROM {schema}.gen_durable_archive_partitions p
          WHERE p.from_at <= s AND p.to_at > s;
         IF taken IS NOT NULL THEN
           s := taken;
           CONTINUE;
         END IF;
         e := s + ('1 ' || grain)::interval;
         SELECT min(p.from_at) INTO taken FROM {schema}.gen_durable_archive_partitions p
          WHERE p.from_at > s AND p.from_at < e;
         IF taken IS NOT NULL THEN
           e := taken;
         END IF;
         suffix := to_char(s AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI');
         EXECUTE format('CREATE TABLE {schema}.%I PARTITION OF {schema}.gen_durable_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_archive_' || suffix, s, e);
         EXECUTE format('CREATE TABLE {schema}.%I PARTITION OF {schema}.gen_durable_history_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_history_archive_' || suffix, s, e);
         EXECUTE format('CREATE TABLE {schema}.%I PARTITION OF {schema}.gen_durable_streams_archive
                           FOR VALUES FROM (%L) TO (%L)', 'gen_durable_streams_archive_' || suffix, s, e);
         INSERT INTO {schema}.gen_durable_archive_partitions (suffix, from_at, to_at)
           VALUES (suffix, s, e);
         made := made + 1;
         s := e;
       END LOOP;
       RETURN made;
     END
     $$`,
    // Drops the partitions (all three tables) whose upper bound is at or before `before`: their
    // rows' retention has ended. Each DROP waits at most 100 ms for its lock (a DROP of a
    // partition locks the parent, so it must not queue the archive's readers behind a long
    // wait); a range that times out is left for the next sweep. Answers the ranges dropped.
    `CREATE FUNCTION {schema}.gen_durable_archive_drop(before timestamptz)
       RETURNS integer LANGUAGE plpgsql AS $$
     DECLARE
       r record;
       dropped integer := 0;
     BEGIN
       LOCK TABLE {schema}.gen_durable_archive_partitions IN SHARE ROW EXCLUSIVE MODE;
       PERFORM set_config('lock_timeout', '100ms', true);
       FOR r IN SELECT p.suffix FROM {schema}.gen_durable_archive_partitions p
                 WHERE p.to_at <= before ORDER BY p.from_at LOOP
         BEGIN
           EXECUTE format('DROP TABLE IF EXISTS {schema}.%I, {schema}.%I, {schema}.%I',
                          'gen_durable_archive_' || r.suffix,
                          'gen_durable_history_archive_' || r.suffix,
                          'gen_durable_streams_archive_' || r.suffix);
           DELETE FROM {schema}.gen_durable_archive_partitions WHERE suffix = r.suffix;
           dropped := dropped + 1;
         EXCEPTION WHEN lock_not_available THEN
           EXIT;
         END;
       END LOOP;
       RETURN dropped;
     END
     $$`,
  ],
  // Down puts the archived rows back into the hot tables first (a parent already dropped from
  // the archive leaves its children with a NULL parent_id, as GC's delete would).
  down: [
    `INSERT INTO {schema}.gen_durable (${INSTANCE_COLUMNS})
       SELECT ${INSTANCE_COLUMNS.replace('parent_id,', `CASE WHEN parent_id IN (SELECT id FROM {schema}.gen_durable_all) THEN parent_id END,`)}
         FROM {schema}.gen_durable_archive`,
    `INSERT INTO {schema}.gen_durable_history (${HISTORY_COLUMNS}) OVERRIDING SYSTEM VALUE
       SELECT ${HISTORY_COLUMNS} FROM {schema}.gen_durable_history_archive`,
    `INSERT INTO {schema}.gen_durable_streams (${STREAM_COLUMNS})
       SELECT ${STREAM_COLUMNS} FROM {schema}.gen_durable_streams_archive`,
    `DROP FUNCTION IF EXISTS {schema}.gen_durable_archive_drop(timestamptz)`,
    `DROP FUNCTION IF EXISTS {schema}.gen_durable_archive_extend(timestamptz, text)`,
    `DROP VIEW IF EXISTS {schema}.gen_durable_streams_all`,
    `DROP VIEW IF EXISTS {schema}.gen_durable_history_all`,
    `DROP VIEW IF EXISTS {schema}.gen_durable_all`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_archive_partitions`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_streams_archive`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_history_archive`,
    `DROP TABLE IF EXISTS {schema}.gen_durable_archive`,
  ],
};
