import { sql } from './statement';

/**
 * The installed schema version: the comment on table `gen_durable` (missing table or comment
 * = 0). `$1` = schema name (unquoted). Catalog lookup, no table scan.
 */
export const READ_SCHEMA_VERSION = sql(
  'read_schema_version',
  `SELECT COALESCE(obj_description(c.oid, 'pg_class'), '0') AS version
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = 'gen_durable' AND c.relkind = 'r'`,
);

/** `synchronous_commit` of the engine's connections (SPEC §26.4 boot warning). */
export const SHOW_SYNCHRONOUS_COMMIT = sql(
  'show_synchronous_commit',
  `SELECT current_setting('synchronous_commit') AS value`,
);
