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
