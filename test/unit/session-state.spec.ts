import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Statement } from '../../lib/sql/statement';

// docs/operations.md "Behind PgBouncer (transaction pooling)": no engine statement may rely on
// session state, because through a transaction pooler each transaction (each statement outside
// one) may run on another server connection. This audits the text of every statement in
// lib/sql (the only place engine SQL lives) and the schema increments: no session-level `SET`
// or `RESET` (only `SET LOCAL`), no session advisory lock (only the `_xact_` ones), no temporary
// table, no SQL-level `PREPARE`, no cursor held past its transaction, and `LISTEN` only in the
// poke listener's own statement (which runs on the dedicated, direct connection of
// `poke: { postgres: { connectionString } }`).

const SQL_DIR = join(__dirname, '..', '..', 'lib', 'sql');
const SCHEMA_DIR = join(__dirname, '..', '..', 'lib', 'schema');
const LISTENER_STATEMENTS = new Set(['listen_pokes']);
// The migrator's online index builds (docs/schema.md "Online index builds") run CREATE INDEX
// CONCURRENTLY, which needs a session connection outside any transaction: their build lock is a
// session lock on that connection. The engine never runs them.
const MIGRATION_SESSION_STATEMENTS = new Set(['try_lock_index_builds', 'unlock_index_builds']);

function isStatement(value: unknown): value is Statement {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Statement).name === 'string' &&
    typeof (value as Statement).text === 'string'
  );
}

function engineStatements(): Statement[] {
  const found: Statement[] = [];
  for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql.ts'))) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const exported = require(join(SQL_DIR, file)) as Record<string, unknown>;
    found.push(...Object.values(exported).filter(isStatement));
  }
  return found;
}

/** What in one statement text would tie later statements to this server session. */
function sessionState(text: string): string[] {
  const problems: string[] = [];
  const parts = text
    .split(';')
    .map((p) => p.trim().toUpperCase())
    .filter((p) => p.length > 0);
  for (const part of parts) {
    if (/^SET\s/.test(part) && !/^SET\s+LOCAL\s/.test(part)) problems.push('session SET');
    if (/^RESET\s/.test(part)) problems.push('RESET');
    if (/^PREPARE\s/.test(part)) problems.push('PREPARE');
    if (/^LISTEN\s/.test(part)) problems.push('LISTEN');
  }
  const upper = text.toUpperCase();
  if (/PG_(TRY_)?ADVISORY_LOCK(_SHARED)?\s*\(/.test(upper)) problems.push('session advisory lock');
  if (/CREATE\s+(GLOBAL\s+|LOCAL\s+)?TEMP(ORARY)?\s/.test(upper)) problems.push('temporary table');
  if (/WITH\s+HOLD/.test(upper)) problems.push('cursor WITH HOLD');
  if (/SET_CONFIG\s*\([^)]*,\s*FALSE\s*\)/.test(upper)) problems.push('session set_config');
  return problems;
}

describe('no engine statement holds session state (PgBouncer transaction pooling)', () => {
  it('every statement in lib/sql: SET LOCAL only, transaction-scoped advisory locks, no temp tables', () => {
    const statements = engineStatements();
    expect(statements.length).toBeGreaterThan(50);
    const offending = statements.flatMap((s) =>
      sessionState(s.text)
        .filter((p) => !(p === 'LISTEN' && LISTENER_STATEMENTS.has(s.name)))
        .filter((p) => !(p === 'session advisory lock' && MIGRATION_SESSION_STATEMENTS.has(s.name)))
        .map((p) => `${s.name}: ${p}`),
    );
    expect(offending).toEqual([]);
    // The two places that need a transaction or a session are the ones the docs name.
    const byName = new Map(statements.map((s) => [s.name, s.text]));
    expect(byName.get('begin')).toMatch(/SET LOCAL statement_timeout/);
    expect([...byName.values()].some((t) => /pg_advisory_xact_lock\(/.test(t))).toBe(true);
  });

  it('the schema increments take no session lock and create no temporary table', () => {
    const offending = readdirSync(SCHEMA_DIR)
      .filter((f) => f.endsWith('.ts'))
      .flatMap((file) =>
        sessionState(readFileSync(join(SCHEMA_DIR, file), 'utf8'))
          .filter((p) => p !== 'session SET' && p !== 'RESET' && p !== 'LISTEN' && p !== 'PREPARE')
          .map((p) => `${file}: ${p}`),
      );
    expect(offending).toEqual([]);
  });
});
