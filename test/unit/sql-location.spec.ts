import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

import * as ts from 'typescript';

// Every runtime SQL statement lives in lib/sql/*.sql.ts as a named, documented
// `Statement` constant, and DDL lives only in lib/schema/. This file enforces both by parsing
// the sources (string and template literals only, so prose in comments never trips it).

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');
const SQL_DIR = join(LIB, 'sql');
const SCHEMA_DIR = join(LIB, 'schema');

/** Statement shapes, uppercase keywords (the house style for SQL text). */
const SQL_PATTERN =
  /\b(SELECT|INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|CREATE\s+(UNIQUE\s+)?(TABLE|INDEX|TYPE|SCHEMA)|ALTER\s+(TABLE|TYPE)|DROP\s+(TABLE|TYPE|SCHEMA|INDEX)|TRUNCATE\s+\S+|WITH\s+\w+\s+AS\s*\(|ON\s+CONFLICT)\b/;

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') out.push(...tsFiles(path));
    } else if (entry.isFile() && entry.name.endsWith('.ts')) {
      out.push(path);
    }
  }
  return out.sort();
}

function parse(fileName: string, text: string): ts.SourceFile {
  return ts.createSourceFile(fileName, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
}

function rel(path: string): string {
  return relative(ROOT, path).split(sep).join('/');
}

/** Every string or template literal in `source` that looks like SQL, as `file:line: text`. */
function findSqlLiterals(fileName: string, text: string): string[] {
  const source = parse(fileName, text);
  const found: string[] = [];
  const check = (node: ts.Node, literal: string): void => {
    if (SQL_PATTERN.test(literal)) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${fileName}:${line + 1}: ${literal.replace(/\s+/g, ' ').trim().slice(0, 80)}`);
    }
  };
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      check(node, node.text);
    } else if (ts.isTemplateExpression(node)) {
      // Substitutions become a placeholder so `SELECT ${cols} FROM` still reads as SQL.
      const joined = [node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' x ');
      check(node, joined);
      node.templateSpans.forEach((span) => visit(span.expression));
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const RUNNER_METHODS = new Set(['query', 'queryResult']);
const STATEMENT_CONSTANT = /^[A-Z][A-Z0-9_]*$/;

/**
 * Calls that build a statement's `$n` order at the call site, as `file:line: call`: a
 * `.query(...)` / `.queryResult(...)` given an array literal (positional parameters), or given
 * a lib/sql statement constant directly (a raw run that bypasses the statement's own parameter
 * builder and row decoder). Outside lib/sql a statement runs as `STATEMENT.run(runner, input)`.
 */
function findPositionalParams(fileName: string, text: string): string[] {
  const source = parse(fileName, text);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      RUNNER_METHODS.has(node.expression.name.text)
    ) {
      const [first, ...rest] = node.arguments;
      const rawStatement =
        first !== undefined && ts.isIdentifier(first) && STATEMENT_CONSTANT.test(first.text);
      if (rawStatement || rest.some((a) => ts.isArrayLiteralExpression(a))) {
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        found.push(
          `${fileName}:${line + 1}: ${node.getText(source).replace(/\s+/g, ' ').slice(0, 80)}`,
        );
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The local names a file imports from a lib/sql module (statement constants among them). */
function libSqlImports(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  for (const stmt of source.statements) {
    if (
      !ts.isImportDeclaration(stmt) ||
      !ts.isStringLiteral(stmt.moduleSpecifier) ||
      !/(^|\/)sql\/[^/]+$/.test(stmt.moduleSpecifier.text)
    ) {
      continue;
    }
    const bindings = stmt.importClause?.namedBindings;
    if (bindings && ts.isNamedImports(bindings)) {
      for (const element of bindings.elements) names.add(element.name.text);
    }
  }
  return names;
}

/**
 * Calls that run a lib/sql statement with a parameter order of their own, as `file:line: call`:
 * a `.query(...)` / `.queryResult(...)` / `.exec(...)` given a statement imported from lib/sql,
 * its `.text` or its `renderStatement(...)`; or any call given such a statement beside an
 * array literal (a helper such as `runOn(pool, CLAIM_RUNNABLE, [queue, 10, …])`). Such a
 * statement runs as `STATEMENT.run(runner, input)`; a runner renders whatever statement it is
 * handed, so its `renderStatement(statement, …)` on a parameter is fine.
 */
function findRawStatementRuns(fileName: string, text: string): string[] {
  const source = parse(fileName, text);
  const imported = libSqlImports(source);
  if (imported.size === 0) return [];
  const namesStatement = (node: ts.Node | undefined): boolean => {
    if (node === undefined) return false;
    if (ts.isIdentifier(node)) return imported.has(node.text);
    if (ts.isPropertyAccessExpression(node)) {
      return node.name.text === 'text' && namesStatement(node.expression);
    }
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression)) {
      return node.expression.text === 'renderStatement' && namesStatement(node.arguments[0]);
    }
    return false;
  };
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const runsRaw =
        ts.isPropertyAccessExpression(node.expression) &&
        RAW_RUN_METHODS.has(node.expression.name.text) &&
        namesStatement(node.arguments[0]);
      const withArray =
        node.arguments.some((a) => namesStatement(a)) &&
        node.arguments.some((a) => ts.isArrayLiteralExpression(a));
      if (runsRaw || withArray) {
        const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
        found.push(
          `${fileName}:${line + 1}: ${node.getText(source).replace(/\s+/g, ' ').slice(0, 80)}`,
        );
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const RAW_RUN_METHODS = new Set(['query', 'queryResult', 'exec']);

/** node-postgres client and query options: snake_case by the driver's API, not row fields. */
const DRIVER_OPTION_NAMES = new Set(['query_timeout', 'application_name']);

/**
 * Snake_case property names read or declared in `text` (a raw row's columns: `r.claim_seq`,
 * `{ parent_id: string }`), as `file:line: name`. Rows are decoded to camelCase by their
 * statement in lib/sql, so outside it no code spells a column.
 */
function findRawRowFields(fileName: string, text: string): string[] {
  const source = parse(fileName, text);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    let name: string | undefined;
    if (ts.isPropertyAccessExpression(node)) {
      name = node.name.text;
    } else if (
      (ts.isPropertySignature(node) ||
        ts.isPropertyAssignment(node) ||
        ts.isPropertyDeclaration(node) ||
        ts.isBindingElement(node)) &&
      node.name !== undefined &&
      (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name))
    ) {
      name = node.name.text;
    } else if (ts.isElementAccessExpression(node) && ts.isStringLiteral(node.argumentExpression)) {
      name = node.argumentExpression.text;
    }
    if (
      name !== undefined &&
      /^[a-z0-9]+(_[a-z0-9]+)+$/.test(name) &&
      !DRIVER_OPTION_NAMES.has(name)
    ) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${fileName}:${line + 1}: ${name}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

interface DeclaredStatement {
  readonly file: string;
  readonly constant: string;
  readonly name: string | undefined;
  readonly documented: boolean;
}

/** The exported `sql(...)` constants of one lib/sql file, plus any `sql(...)` call outside one. */
function declaredStatements(path: string): { statements: DeclaredStatement[]; stray: string[] } {
  const text = readFileSync(path, 'utf8');
  const source = parse(path, text);
  const statements: DeclaredStatement[] = [];
  const stray: string[] = [];
  const declarationInits = new Set<ts.Node>();
  let previous: { documented: boolean; endLine: number } | undefined;

  for (const stmt of source.statements) {
    const exported =
      ts.isVariableStatement(stmt) &&
      stmt.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    const declarations = ts.isVariableStatement(stmt) ? stmt.declarationList.declarations : [];
    const sqlDecls = declarations.filter((d) => d.initializer && isSqlCall(d.initializer));
    if (!exported || sqlDecls.length === 0) {
      previous = undefined;
      continue;
    }
    const startLine = source.getLineAndCharacterOfPosition(stmt.getStart(source)).line;
    const endLine = source.getLineAndCharacterOfPosition(stmt.getEnd()).line;
    const hasComment = (ts.getLeadingCommentRanges(text, stmt.getFullStart()) ?? []).length > 0;
    // A run of declarations with no blank line between them shares the comment above the first
    // (e.g. BEGIN / COMMIT / ROLLBACK).
    const documented =
      hasComment ||
      (previous !== undefined && previous.documented && previous.endLine === startLine - 1);
    for (const decl of sqlDecls) {
      const call = decl.initializer as ts.CallExpression;
      declarationInits.add(call);
      const first = call.arguments[0];
      statements.push({
        file: rel(path),
        constant: decl.name.getText(source),
        name:
          first && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first))
            ? first.text
            : undefined,
        documented,
      });
    }
    previous = { documented, endLine };
  }

  const visit = (node: ts.Node): void => {
    if (isSqlCall(node) && !declarationInits.has(node)) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      stray.push(`${rel(path)}:${line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { statements, stray };
}

function isSqlCall(node: ts.Node): node is ts.CallExpression {
  return (
    ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'sql'
  );
}

describe('SQL location', () => {
  describe('the scanner', () => {
    it('finds SQL in string and template literals', () => {
      const source = [
        `const a = 'SELECT 1 FROM x';`,
        'const b = `UPDATE {schema}.gen_durable SET step = $1`;',
        'const c = `DELETE FROM ${table} WHERE id = $1`;',
        `const d = "CREATE TABLE t (id int)";`,
      ].join('\n');
      expect(findSqlLiterals('probe.ts', source)).toHaveLength(4);
    });

    it('ignores comments, identifiers and ordinary prose', () => {
      const source = [
        '// SELECT the next runnable row, then UPDATE it SET to executing',
        '/** INSERT INTO happens in the flusher. */',
        `const SELECT = 'select a queue';`,
        `const msg = 'Selected rows were updated';`,
      ].join('\n');
      expect(findSqlLiterals('probe.ts', source)).toEqual([]);
    });
  });

  describe('the positional-parameter scanner', () => {
    it('finds parameter arrays and raw statement runs built at a call site', () => {
      const source = [
        'await this.sql.query(CLAIM_RUNNABLE, [queue, batch, worker]);',
        'await sql.queryResult(GC_DELETE, [ids]);',
        "await client.query('SELECT 1 WHERE id = $1', [id]);",
        'await this.sql.query(READ_GATE_DEFICITS);',
      ].join('\n');
      expect(findPositionalParams('probe.ts', source)).toHaveLength(4);
    });

    it('accepts a statement run with named inputs and plain pass-through calls', () => {
      const source = [
        'await CLAIM_RUNNABLE.run(this.sql, { queue, limit, worker, leaseMs, gates });',
        'await LOCK_GATE_SHARDS.run(this.sql, undefined, tx);',
        'await client.query(this.listenText);',
        'await conn.query(renderStatement(statement, schema), values as unknown[]);',
      ].join('\n');
      expect(findPositionalParams('probe.ts', source)).toEqual([]);
    });
  });

  describe('the raw-run scanner', () => {
    it('finds a lib/sql statement run with a parameter array of its own', () => {
      const source = [
        "import { CLAIM_RUNNABLE, HEARTBEAT as BEAT } from '../../lib/sql/claim.sql';",
        "import { renderStatement } from '../../lib/sql/statement';",
        "await pool.query(renderStatement(CLAIM_RUNNABLE, 'public'), ['q', 10, 'w', 1000, []]);",
        'await session.exec(CLAIM_RUNNABLE.text, [queue]);',
        "await executor.queryResult(BEAT, ['w', [id], [seq], 1000]);",
        "const rows = await runOn(pool, CLAIM_RUNNABLE, ['q', 10, 'w', 1000, []]);",
        "await other.run(BEAT, ['w', [id], [seq], 1000]);",
      ].join('\n');
      expect(findRawStatementRuns('probe.ts', source)).toHaveLength(5);
    });

    it('accepts STATEMENT.run, a generic runner and a test-side query of its own', () => {
      const source = [
        "import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';",
        "import { renderStatement } from '../../lib/sql/statement';",
        'const runner = { queryResult: (s, v) => pool.query(renderStatement(s, schema), v) };',
        'await CLAIM_RUNNABLE.run(runner, { queue, limit, worker, leaseMs, gates: [] });',
        "await pool.query('SELECT status FROM gen_durable WHERE id = $1', [id]);",
        "await explain(client, 'claim', CLAIM_RUNNABLE, CLAIM_RUNNABLE.params(claim));",
        "expect(CLAIM_RUNNABLE.text).toContain('SKIP LOCKED');",
      ].join('\n');
      expect(findRawStatementRuns('probe.ts', source)).toEqual([]);
    });
  });

  it('lib/, test/ and bench/ run lib/sql statements only through their own parameter builders', () => {
    const files = [
      ...tsFiles(LIB).filter((f) => !f.startsWith(SQL_DIR + sep)),
      ...tsFiles(join(ROOT, 'test')),
      ...tsFiles(join(ROOT, 'bench')),
    ];
    expect(files.length).toBeGreaterThan(0);
    const found = files.flatMap((f) => findRawStatementRuns(rel(f), readFileSync(f, 'utf8')));
    // Call STATEMENT.run(runner, input) (test/support/raw-session.ts, poolRunner in
    // test/chaos/support/race-fixtures.ts) instead of restating the statement's $n order.
    expect(found).toEqual([]);
  });

  it('lib/ outside lib/sql/ builds no positional parameter array (statements own their $n order)', () => {
    const files = tsFiles(LIB).filter((f) => !f.startsWith(SQL_DIR + sep));
    expect(files.length).toBeGreaterThan(0);
    const found = files.flatMap((f) => findPositionalParams(rel(f), readFileSync(f, 'utf8')));
    // Give the statement a parameter builder in lib/sql and call STATEMENT.run(runner, input).
    expect(found).toEqual([]);
  });

  describe('the raw-row scanner', () => {
    it('finds snake_case row fields read, declared or destructured', () => {
      const source = [
        'const seq = row.claim_seq;',
        'interface R { parent_id: string | null }',
        "const e = r['last_error'];",
        'const { fsm_version } = r;',
      ].join('\n');
      expect(findRawRowFields('probe.ts', source)).toHaveLength(4);
    });

    it('accepts camelCase fields and the driver options', () => {
      const source = [
        'const seq = row.claimSeq;',
        'const config = { text, values, query_timeout: 5000 };',
        'new Client({ application_name: name });',
      ].join('\n');
      expect(findRawRowFields('probe.ts', source)).toEqual([]);
    });
  });

  it('lib/ outside lib/sql/ and lib/schema/ spells no column (statements decode their rows)', () => {
    const files = tsFiles(LIB).filter(
      (f) => !f.startsWith(SQL_DIR + sep) && !f.startsWith(SCHEMA_DIR + sep),
    );
    const found = files.flatMap((f) => findRawRowFields(rel(f), readFileSync(f, 'utf8')));
    // Decode the row in the statement's codec (lib/sql) and read the camelCase field.
    expect(found).toEqual([]);
  });

  it('lib/ outside lib/sql/ and lib/schema/ contains no SQL text', () => {
    const files = tsFiles(LIB).filter(
      (f) => !f.startsWith(SQL_DIR + sep) && !f.startsWith(SCHEMA_DIR + sep),
    );
    expect(files.length).toBeGreaterThan(0);
    const found = files.flatMap((f) => findSqlLiterals(rel(f), readFileSync(f, 'utf8')));
    // Move each finding into a named Statement in lib/sql/*.sql.ts (DDL: lib/schema/).
    expect(found).toEqual([]);
  });

  describe('lib/sql/*.sql.ts', () => {
    const files = tsFiles(SQL_DIR).filter((f) => f.endsWith('.sql.ts'));
    const results = files.map(declaredStatements);
    const statements = results.flatMap((r) => r.statements);

    it('declares statements', () => {
      expect(files.length).toBeGreaterThan(0);
      expect(statements.length).toBeGreaterThan(0);
    });

    it('builds every statement as an exported constant', () => {
      expect(results.flatMap((r) => r.stray)).toEqual([]);
    });

    it('names every statement with a literal snake_case name', () => {
      const bad = statements
        .filter((s) => s.name === undefined || !/^[a-z][a-z0-9_]*$/.test(s.name))
        .map((s) => `${s.file}: ${s.constant}`);
      expect(bad).toEqual([]);
    });

    it('uses each constant name once across lib/sql', () => {
      const seen = new Map<string, string>();
      const duplicates: string[] = [];
      for (const s of statements) {
        const other = seen.get(s.constant);
        if (other) {
          duplicates.push(`${s.constant}: ${other} and ${s.file}`);
        }
        seen.set(s.constant, s.file);
      }
      expect(duplicates).toEqual([]);
    });

    it('uses each statement name once (the prepared-statement cache key)', () => {
      const byName = new Map<string, string[]>();
      for (const s of statements) {
        if (s.name !== undefined) {
          byName.set(s.name, [...(byName.get(s.name) ?? []), s.constant]);
        }
      }
      // Every name keys the executor's prepared-statement cache, where a duplicate would run the
      // wrong text; transaction control (BEGIN_WITH_TIMEOUTS reports as `begin`) is named once too.
      const duplicates = [...byName]
        .filter(([, constants]) => constants.length > 1)
        .map(([name, constants]) => `'${name}': ${constants.join(', ')}`);
      expect(duplicates).toEqual([]);
    });

    it('documents every statement with a comment above it', () => {
      const undocumented = statements
        .filter((s) => !s.documented)
        .map((s) => `${s.file}: ${s.constant}`);
      // Say what it does, which index serves it and which invariant it protects.
      expect(undocumented).toEqual([]);
    });
  });
});
