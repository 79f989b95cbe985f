/**
 * One frozen schema increment: the DDL that takes the schema from `version - 1` to `version`
 * and back. Texts use `{schema}` for the quoted schema name. Never edit a shipped increment;
 * add the next one (docs/design.md §3.6).
 */
export interface SchemaIncrement {
  readonly version: number;
  readonly up: readonly string[];
  readonly down: readonly string[];
}
