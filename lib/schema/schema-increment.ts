/**
 * One frozen schema increment: the DDL that takes the schema from `version - 1` to `version`
 * and back. Texts use `{schema}` for the quoted schema name. Never edit a shipped increment;
 * add the next one (docs/design.md §3.6).
 */
/**
 * An index an increment builds online (docs/schema.md "Online index builds"): after the
 * increment's transactional `up` commits, the migrator runs `CREATE [UNIQUE] INDEX CONCURRENTLY
 * IF NOT EXISTS <name> ON <on>` outside any transaction, records it in
 * `gen_durable_index_builds`, and rebuilds it on the next run if a failed or interrupted build
 * left it INVALID. A run from nothing (an empty table) or one the caller holds inside its own
 * transaction builds it in the transaction instead (`CREATE INDEX`, no CONCURRENTLY).
 */
export interface ConcurrentIndex {
  /** The index name (unqualified, prefixed `gen_durable`). */
  readonly name: string;
  /** What follows `ON`: `{schema}.<table> (<columns>) [WHERE <predicate>]`. */
  readonly on: string;
  readonly unique?: boolean;
}

export interface SchemaIncrement {
  readonly version: number;
  readonly up: readonly string[];
  readonly down: readonly string[];
  /**
   * Set on an increment that only renames objects: old name → new name, for the objects earlier
   * increments created under the old names, which its `up` renames (and `down` renames back). A
   * migration from nothing through this version renders the earlier increments' texts with the
   * new names and skips this `up`; a revert from it to nothing does the same with `down`
   * (docs/design.md §3.6).
   */
  readonly renames?: Readonly<Record<string, string>>;
  /**
   * Indexes built online after `up` commits (needs the table `gen_durable_index_builds`, which
   * version 14 creates). Reverting the increment drops them inside the revert's transaction.
   */
  readonly concurrentIndexes?: readonly ConcurrentIndex[];
}
