/**
 * One frozen schema increment: the DDL that takes the schema from `version - 1` to `version`
 * and back. Texts use `{schema}` for the quoted schema name. Never edit a shipped increment;
 * add the next one (docs/design.md §3.6).
 */
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
}
