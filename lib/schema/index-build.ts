/**
 * An online index build as the migrator, `verify` and the boot check report it (docs/schema.md
 * "Online index builds"). Pure types, a leaf: the public `readSchemaIndexBuilds` answers them,
 * so its declaration must not reach the statement layer (and through it `pg`'s types).
 */

/** Where one online index build stands (READ_INDEX_BUILDS, lib/sql/schema.sql.ts). */
export type IndexBuildState = 'valid' | 'missing' | 'invalid' | 'building';

/** One index an increment builds online, as the catalog and `gen_durable_index_builds` see it. */
export interface IndexBuild {
  readonly name: string;
  /**
   * `valid`: built and usable; `missing`: no such index; `building`: an INVALID index a
   * `CREATE INDEX CONCURRENTLY` is building right now (pg_stat_progress_create_index names it);
   * `invalid`: an INVALID index no build is working on, left by a failed or interrupted build.
   */
  readonly state: IndexBuildState;
  /** True when `gen_durable_index_builds` records the build as finished. */
  readonly recorded: boolean;
  /** The error the last failed build recorded, or null. */
  readonly error: string | null;
}
