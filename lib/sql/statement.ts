/**
 * A runtime SQL statement: a stable name (its prepared-statement name is derived from it) and
 * static text. The text names tables as `{schema}.table`; the executor substitutes the quoted
 * schema once per engine, so each engine runs a fixed, cacheable text (SPEC §1.2 R3).
 */
export interface Statement {
  /** snake_case operation name, e.g. `claim_runnable`. */
  readonly name: string;
  /** Static SQL with `{schema}` placeholders and `$n` parameters. */
  readonly text: string;
}

/** Declares a statement; the only way lib/sql files build one. */
export function sql(name: string, text: string): Statement {
  return Object.freeze({ name, text: text.trim() });
}

/** Quotes an identifier for use in SQL text (schema names come from options, never from rows). */
export function quoteIdent(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/** Renders a statement's text for one schema. */
export function renderStatement(statement: Statement, schema: string): string {
  return statement.text.replace(/\{schema\}/g, quoteIdent(schema));
}
