import type { PoolClient } from 'pg';

/**
 * A runtime SQL statement: a stable name (its prepared-statement name is derived from it) and
 * static text. The text names tables as `{schema}.table`; the executor substitutes the quoted
 * schema once per engine, so each engine runs a fixed, cacheable text (docs/design.md §1.2 R3).
 */
export interface Statement {
  /** snake_case operation name, e.g. `claim_runnable`. */
  readonly name: string;
  /** Static SQL with `{schema}` placeholders and `$n` parameters. */
  readonly text: string;
}

/** What a runner hands back for one statement: the raw rows and the affected-row count. */
export interface StatementResult {
  readonly rows: readonly unknown[];
  readonly rowCount: number | null;
}

/**
 * Runs a statement's text with positional values: the SqlExecutor (prepared names, timeouts,
 * the statement hook). `on` is a client inside a transaction; without it the runner takes a
 * pooled connection.
 */
export interface StatementRunner {
  queryResult(
    statement: Statement,
    values: readonly unknown[],
    on?: PoolClient,
  ): Promise<StatementResult>;
}

/**
 * The half of a statement that only lib/sql knows: how named inputs become the `$n` array
 * (element 0 is `$1`) and how the raw rows become what callers receive. Decoders use plain
 * loops: several run on the drain's hot path once per batch.
 */
export interface StatementCodec<I, Raw, R> {
  readonly params: (input: I) => unknown[];
  readonly decode: (rows: readonly Raw[], input: I, rowCount: number) => R;
}

/**
 * A statement as one unit: its text, its parameter builder and its row decoder. Callers pass
 * named inputs and receive typed results; the `$n` order and the raw row shape stay in
 * lib/sql.
 */
export interface TypedStatement<I, R, Raw = unknown> extends Statement {
  /** Named inputs → positional parameters. */
  params(input: I): unknown[];
  /** Raw rows (and the affected-row count) → the typed result. */
  decode(rows: readonly Raw[], input: I, rowCount?: number): R;
  /** Runs the statement through `runner` (on the transaction client `on`, if given). */
  run(runner: StatementRunner, input: I, on?: PoolClient): Promise<R>;
}

class CodedStatement<I, Raw, R> implements TypedStatement<I, R, Raw> {
  constructor(
    readonly name: string,
    readonly text: string,
    private readonly codec: StatementCodec<I, Raw, R>,
  ) {}

  params(input: I): unknown[] {
    return this.codec.params(input);
  }

  decode(rows: readonly Raw[], input: I, rowCount = rows.length): R {
    return this.codec.decode(rows, input, rowCount);
  }

  async run(runner: StatementRunner, input: I, on?: PoolClient): Promise<R> {
    const result = await runner.queryResult(this, this.codec.params(input), on);
    return this.codec.decode(result.rows as readonly Raw[], input, result.rowCount ?? 0);
  }
}

/**
 * Declares a statement; the only way lib/sql files build one. Without a codec it is a bare
 * statement (transaction control, LISTEN: run by the executor or a dedicated connection, no
 * parameters, no rows).
 */
export function sql(name: string, text: string): Statement;
export function sql<I, Raw, R>(
  name: string,
  text: string,
  codec: StatementCodec<I, Raw, R>,
): TypedStatement<I, R, Raw>;
export function sql<I, Raw, R>(
  name: string,
  text: string,
  codec?: StatementCodec<I, Raw, R>,
): Statement | TypedStatement<I, R, Raw> {
  if (codec === undefined) return Object.freeze({ name, text: text.trim() });
  return Object.freeze(new CodedStatement(name, text.trim(), codec));
}

/** The parameter builder of a statement without inputs (`run(runner)` takes none). */
export function noParams(_input: void): unknown[] {
  return [];
}

/** Quotes an identifier for use in SQL text (schema names come from options, never from rows). */
export function quoteIdent(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

/** Renders a statement's text for one schema. */
export function renderStatement(statement: Statement, schema: string): string {
  return statement.text.replace(/\{schema\}/g, quoteIdent(schema));
}
