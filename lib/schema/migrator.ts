import {
  COUNT_SCHEMA_CONTENTS,
  FORGET_INDEX_BUILDS,
  LOCK_SCHEMA_MIGRATION,
  READ_SCHEMA_VERSION,
} from '../sql/schema.sql';
import type { IndexBuild } from './index-build';
import { quoteIdent, renderStatement, type StatementRunner } from '../sql/statement';
import {
  buildIndexesInTransaction,
  buildIndexesOnline,
  dropIndexText,
  readIndexBuilds,
} from './index-builds';
import { CURRENT_SCHEMA_VERSION, SCHEMA_INCREMENTS } from './increments';
import type { SchemaIncrement } from './schema-increment';

/** The one thing the migrator needs from a connection: run text with parameters. */
export interface MigrationConnection {
  query(text: string, parameters?: unknown[]): Promise<unknown>;
  /** True when the caller already holds an open transaction on this connection. */
  readonly inTransaction: boolean;
}

export interface MigrationOptions {
  /** Schema of every object (default `public`); created if missing. */
  schema?: string;
  /** Target version (default: latest for `up`, 0 for `down`). */
  version?: number;
}

const CREATE_SCHEMA = 'CREATE SCHEMA IF NOT EXISTS {schema}';
const SET_VERSION = "COMMENT ON TABLE {schema}.gen_durable IS '{version}'";
const DROP_SCHEMA = 'DROP SCHEMA {schema}';

function render(text: string, schema: string): string {
  return text.replace(/\{schema\}/g, quoteIdent(schema));
}

/**
 * The renaming increments (those with `renames`) a run passes over: a run that builds the
 * schema from nothing (`fromNothing`) up to `through`, or removes it from `through` down to
 * nothing, never holds the old names, so it skips them (docs/design.md §3.6). Any other run
 * starts or ends on a schema that has the old names and applies them like any increment.
 */
function renamesPassedOver(fromNothing: boolean, through: number): readonly SchemaIncrement[] {
  return fromNothing
    ? SCHEMA_INCREMENTS.filter((i) => i.renames !== undefined && i.version <= through)
    : [];
}

/** `text` with each old name of `renames` standing alone (not part of a longer name) replaced. */
function renamed(text: string, renames: Readonly<Record<string, string>>): string {
  let out = text;
  for (const [from, to] of Object.entries(renames)) {
    out = out.replace(new RegExp(`(?<![\\w$])${from}(?![\\w$])`, 'g'), to);
  }
  return out;
}

/**
 * The statements of `increment`'s `up` or `down` for this run, rendered for `schema`: none for a
 * rename the run passes over, and the texts of an increment older than such a rename with the
 * new names already in place.
 */
function statementsOf(
  increment: SchemaIncrement,
  direction: 'up' | 'down',
  passedOver: readonly SchemaIncrement[],
  schema: string,
): string[] {
  if (passedOver.includes(increment)) return [];
  const later = passedOver.filter((rename) => rename.version > increment.version);
  return increment[direction].map((ddl) =>
    render(
      later.reduce((text, rename) => renamed(text, rename.renames ?? {}), ddl),
      schema,
    ),
  );
}

/**
 * lib/sql statements on a migration connection: rendered for `schema`, unprepared (a host
 * QueryRunner answers rows as an array, a pg client as a result object; both are read).
 */
function runnerOf(conn: MigrationConnection, schema: string): StatementRunner {
  return {
    async queryResult(statement, values) {
      const result = await conn.query(renderStatement(statement, schema), values as unknown[]);
      const rows: readonly unknown[] = Array.isArray(result)
        ? result
        : ((result as { rows?: unknown[] } | undefined)?.rows ?? []);
      return { rows, rowCount: rows.length };
    },
  };
}

/** Reads the installed version of `schema` (0 when absent). */
export function readSchemaVersion(conn: MigrationConnection, schema: string): Promise<number> {
  return READ_SCHEMA_VERSION.run(runnerOf(conn, schema), { schema });
}

/**
 * Where the online index builds of `schema` at version `installed` stand (docs/schema.md
 * "Online index builds"): one entry per index an installed increment builds online.
 */
export function readSchemaIndexBuilds(
  conn: MigrationConnection,
  schema: string,
  installed: number,
): Promise<IndexBuild[]> {
  return readIndexBuilds(runnerOf(conn, schema), schema, installed);
}

async function inTransaction(conn: MigrationConnection, fn: () => Promise<void>): Promise<void> {
  if (conn.inTransaction) return fn();
  await conn.query('BEGIN');
  try {
    await fn();
    await conn.query('COMMIT');
  } catch (err) {
    await conn.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * Applies the missing increments up to `version` (default latest) under a schema-scoped
 * advisory lock in one transaction; a no-op when already there. Safe to run twice and from
 * two processes at once. Then builds the increments' online indexes (docs/schema.md "Online
 * index builds"): after the commit with `CREATE INDEX CONCURRENTLY`, one at a time, rebuilding
 * any a failed or interrupted build left INVALID; inside the transaction instead on a run from
 * nothing (the tables are empty) or when the caller holds the transaction
 * (`conn.inTransaction`). An online build needs `conn` to be one session (not a transaction-mode
 * pooler) and throws IndexBuildError when it fails, after the increments committed.
 */
export async function migrateUp(
  conn: MigrationConnection,
  options: MigrationOptions = {},
): Promise<void> {
  const schema = options.schema ?? 'public';
  const target = options.version ?? CURRENT_SCHEMA_VERSION;
  if (!Number.isInteger(target) || target < 0 || target > CURRENT_SCHEMA_VERSION) {
    throw new RangeError(
      `gen-durable migration: version must be an integer in 0..${CURRENT_SCHEMA_VERSION}`,
    );
  }
  const runner = runnerOf(conn, schema);
  const callerTransaction = conn.inTransaction;
  let online = !callerTransaction;
  await inTransaction(conn, async () => {
    await LOCK_SCHEMA_MIGRATION.run(runner, { schema });
    await conn.query(render(CREATE_SCHEMA, schema));
    const installed = await readSchemaVersion(conn, schema);
    if (installed === 0) online = false;
    if (installed < target) {
      const passedOver = renamesPassedOver(installed === 0, target);
      for (const increment of SCHEMA_INCREMENTS) {
        if (increment.version <= installed || increment.version > target) continue;
        for (const ddl of statementsOf(increment, 'up', passedOver, schema)) await conn.query(ddl);
      }
    }
    if (!online) await buildIndexesInTransaction(conn, runner, schema, target);
    if (installed < target) {
      await conn.query(render(SET_VERSION, schema).replace('{version}', String(target)));
    }
  });
  if (online) await buildIndexesOnline(conn, runner, schema, target);
}

/**
 * Reverts increments from the top down to `version` (default 0 = everything gone, including
 * a non-public schema left empty).
 */
export async function migrateDown(
  conn: MigrationConnection,
  options: MigrationOptions = {},
): Promise<void> {
  const schema = options.schema ?? 'public';
  const target = options.version ?? 0;
  if (!Number.isInteger(target) || target < 0) {
    throw new RangeError('gen-durable migration: version must be a non-negative integer');
  }
  await inTransaction(conn, async () => {
    await LOCK_SCHEMA_MIGRATION.run(runnerOf(conn, schema), { schema });
    const installed = await readSchemaVersion(conn, schema);
    const passedOver = renamesPassedOver(target === 0, installed);
    for (const increment of [...SCHEMA_INCREMENTS].reverse()) {
      if (increment.version > installed || increment.version <= target) continue;
      const online = (increment.concurrentIndexes ?? []).map((i) => i.name);
      if (online.length > 0) {
        for (const name of online) await conn.query(dropIndexText(name, schema));
        await FORGET_INDEX_BUILDS.run(runnerOf(conn, schema), { names: online });
      }
      for (const ddl of statementsOf(increment, 'down', passedOver, schema)) await conn.query(ddl);
    }
    if (target > 0) {
      await conn.query(render(SET_VERSION, schema).replace('{version}', String(target)));
      return;
    }
    if (schema !== 'public') {
      const left = await COUNT_SCHEMA_CONTENTS.run(runnerOf(conn, schema), { schema });
      if (left.objects === 0 && left.types === 0) await conn.query(render(DROP_SCHEMA, schema));
    }
  });
}
