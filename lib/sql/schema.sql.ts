import type { IndexBuild } from '../schema/index-build';
import { noRows } from './row-decoders';
import { noParams, sql } from './statement';

/** The schema a statement of the migrator or the boot check is about (unquoted). */
export interface SchemaInput {
  readonly schema: string;
}

/**
 * The installed schema version: the comment on table `gen_durable` (missing table or comment
 * = 0; a comment that is not an integer reads as 0). `$1` = schema name (unquoted). Catalog
 * lookup, no table scan.
 */
export const READ_SCHEMA_VERSION = sql(
  'read_schema_version',
  `SELECT COALESCE(obj_description(c.oid, 'pg_class'), '0') AS version
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = 'gen_durable' AND c.relkind = 'r'`,
  {
    params: (i: SchemaInput) => [i.schema],
    decode: (rows: readonly { version: string }[]): number => {
      const version = Number(rows[0]?.version ?? 0);
      return Number.isInteger(version) ? version : 0;
    },
  },
);

/** `synchronous_commit` of the engine's connections (docs/design.md §26.4 boot warning). */
export const SHOW_SYNCHRONOUS_COMMIT = sql(
  'show_synchronous_commit',
  `SELECT current_setting('synchronous_commit') AS value`,
  { params: noParams, decode: (rows: readonly { value: string }[]) => rows[0]?.value },
);

/**
 * Serialises concurrent migrations of one schema `$1` (two processes booting at once). Taken
 * transaction-scoped, so COMMIT or ROLLBACK releases it. No table touched.
 */
export const LOCK_SCHEMA_MIGRATION = sql(
  'lock_schema_migration',
  `SELECT pg_advisory_xact_lock(hashtext('gen_durable:migrate:' || $1))`,
  { params: (i: SchemaInput) => [i.schema], decode: noRows },
);

/**
 * What is left in schema `$1` after a full revert: its relations and its types (catalog
 * lookups). A non-public schema is dropped only when both are zero, so objects the host put
 * there survive.
 */
export const COUNT_SCHEMA_CONTENTS = sql(
  'count_schema_contents',
  `SELECT (SELECT count(*)::int FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1) AS objects,
          (SELECT count(*)::int FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = $1) AS types`,
  {
    params: (i: SchemaInput) => [i.schema],
    decode: (rows: readonly { objects: number; types: number }[]) =>
      rows[0] ?? { objects: 1, types: 1 },
  },
);

/**
 * The online indexes `$2` (names) of schema `$1`: catalog lookups (pg_class by name, pg_index,
 * pg_stat_progress_create_index by index oid) and a primary-key probe per name of
 * `gen_durable_index_builds`. Run by the migrator, `verify` and the engine's boot check, only on a
 * schema at a version that has the tracking table. Another role's build in progress reads as
 * `invalid` unless this role may read its progress (pg_read_all_stats).
 */
export const READ_INDEX_BUILDS = sql(
  'read_index_builds',
  `SELECT w.name, i.indisvalid AS valid,
          EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = c.oid) AS building,
          b.finished_at IS NOT NULL AS recorded, b.error
     FROM unnest($2::text[]) WITH ORDINALITY AS w(name, ord)
     LEFT JOIN pg_namespace n ON n.nspname = $1
     LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = w.name AND c.relkind = 'i'
     LEFT JOIN pg_index i ON i.indexrelid = c.oid
     LEFT JOIN {schema}.gen_durable_index_builds b ON b.name = w.name
    ORDER BY w.ord`,
  {
    params: (i: SchemaInput & { readonly names: readonly string[] }) => [i.schema, i.names],
    decode: (
      rows: readonly {
        name: string;
        valid: boolean | null;
        building: boolean;
        recorded: boolean;
        error: string | null;
      }[],
    ): IndexBuild[] =>
      rows.map((r) => ({
        name: r.name,
        state:
          r.valid === null ? 'missing' : r.valid ? 'valid' : r.building ? 'building' : 'invalid',
        recorded: r.recorded,
        error: r.error,
      })),
  },
);

/**
 * Records that the online build of index `$1` (schema version `$2`) starts: a new row, or the
 * previous attempt's row reset (`attempts` + 1, finished_at and error cleared). Primary key
 * `gen_durable_index_builds_pkey`.
 */
export const RECORD_INDEX_BUILD_START = sql(
  'record_index_build_start',
  `INSERT INTO {schema}.gen_durable_index_builds (name, version, started_at, attempts)
   VALUES ($1, $2, now(), 1)
   ON CONFLICT (name) DO UPDATE
      SET started_at = now(), finished_at = NULL, error = NULL,
          attempts = {schema}.gen_durable_index_builds.attempts + 1`,
  {
    params: (i: { readonly name: string; readonly version: number }) => [i.name, i.version],
    decode: noRows,
  },
);

/**
 * Records that index `$1` (schema version `$2`) is built and valid (an upsert: a build inside the
 * migration's transaction, or a valid index found with no finished record, writes its row
 * here). Primary key `gen_durable_index_builds_pkey`.
 */
export const RECORD_INDEX_BUILD_DONE = sql(
  'record_index_build_done',
  `INSERT INTO {schema}.gen_durable_index_builds (name, version, started_at, finished_at, attempts)
   VALUES ($1, $2, now(), now(), 1)
   ON CONFLICT (name) DO UPDATE SET finished_at = now(), error = NULL`,
  {
    params: (i: { readonly name: string; readonly version: number }) => [i.name, i.version],
    decode: noRows,
  },
);

/** Records the error `$2` of the failed online build of index `$1` (primary key probe). */
export const RECORD_INDEX_BUILD_FAILED = sql(
  'record_index_build_failed',
  `UPDATE {schema}.gen_durable_index_builds SET error = $2 WHERE name = $1`,
  {
    params: (i: { readonly name: string; readonly error: string }) => [i.name, i.error],
    decode: noRows,
  },
);

/** Forgets the builds of the indexes `$1` a revert dropped (primary key probes). */
export const FORGET_INDEX_BUILDS = sql(
  'forget_index_builds',
  `DELETE FROM {schema}.gen_durable_index_builds WHERE name = ANY ($1::text[])`,
  { params: (i: { readonly names: readonly string[] }) => [i.names], decode: noRows },
);

/**
 * Tries to take the session-level advisory lock that serialises the online index builds of
 * schema `$1` (two migrators at once). A try, never a wait: a session waiting on a lock holds a
 * snapshot, which a `CREATE INDEX CONCURRENTLY` of the lock's holder would wait for in turn.
 */
export const TRY_LOCK_INDEX_BUILDS = sql(
  'try_lock_index_builds',
  `SELECT pg_try_advisory_lock(hashtext('gen_durable:index-builds:' || $1)) AS locked`,
  {
    params: (i: SchemaInput) => [i.schema],
    decode: (rows: readonly { locked: boolean }[]) => rows[0]?.locked === true,
  },
);

/** Releases TRY_LOCK_INDEX_BUILDS's lock of schema `$1`. */
export const UNLOCK_INDEX_BUILDS = sql(
  'unlock_index_builds',
  `SELECT pg_advisory_unlock(hashtext('gen_durable:index-builds:' || $1)) AS unlocked`,
  { params: (i: SchemaInput) => [i.schema], decode: noRows },
);
