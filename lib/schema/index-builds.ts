import { IndexBuildError } from '../errors/index-build.error';
import {
  READ_INDEX_BUILDS,
  RECORD_INDEX_BUILD_DONE,
  RECORD_INDEX_BUILD_FAILED,
  RECORD_INDEX_BUILD_START,
  TRY_LOCK_INDEX_BUILDS,
  UNLOCK_INDEX_BUILDS,
} from '../sql/schema.sql';
import type { IndexBuild } from './index-build';
import { quoteIdent, type StatementRunner } from '../sql/statement';
import { SCHEMA_INCREMENTS } from './increments';
import type { ConcurrentIndex } from './schema-increment';

/** The connection the builds run DDL on: one session, outside any transaction for online builds. */
export interface IndexBuildConnection {
  query(text: string, parameters?: unknown[]): Promise<unknown>;
}

/** An index some increment builds online, with that increment's version. */
export interface OnlineIndex {
  readonly version: number;
  readonly index: ConcurrentIndex;
}

/** How long a migrator waits between tries of the build lock another migrator holds. */
const LOCK_RETRY_MS = 200;

/** The online indexes of the increments up to `version`, in version order. */
export function onlineIndexesThrough(version: number): OnlineIndex[] {
  return SCHEMA_INCREMENTS.filter((i) => i.version <= version).flatMap((i) =>
    (i.concurrentIndexes ?? []).map((index) => ({ version: i.version, index })),
  );
}

function createText(index: ConcurrentIndex, schema: string, concurrently: boolean): string {
  const on = index.on.replace(/\{schema\}/g, quoteIdent(schema));
  return `CREATE ${index.unique === true ? 'UNIQUE ' : ''}INDEX ${concurrently ? 'CONCURRENTLY ' : ''}IF NOT EXISTS ${quoteIdent(index.name)} ON ${on}`;
}

function dropText(name: string, schema: string, concurrently: boolean): string {
  return `DROP INDEX ${concurrently ? 'CONCURRENTLY ' : ''}IF EXISTS ${quoteIdent(schema)}.${quoteIdent(name)}`;
}

/** The statement that drops online index `name` inside a revert's transaction. */
export function dropIndexText(name: string, schema: string): string {
  return dropText(name, schema, false);
}

/**
 * Where the online indexes of a schema at version `installed` stand (none below the version that
 * created `gen_durable_index_builds`): what `verify` and the engine's boot check report.
 */
export function readIndexBuilds(
  runner: StatementRunner,
  schema: string,
  installed: number,
): Promise<IndexBuild[]> {
  const names = onlineIndexesThrough(installed).map((o) => o.index.name);
  if (names.length === 0) return Promise.resolve([]);
  return READ_INDEX_BUILDS.run(runner, { schema, names });
}

/**
 * Builds the online indexes through `version` that are missing or INVALID inside the caller's
 * open transaction (plain `CREATE INDEX`, which blocks writes to the table while it runs): a
 * migration from nothing, where the tables are empty, or one the host runs in its own
 * transaction (docs/schema.md "Online index builds").
 */
export async function buildIndexesInTransaction(
  conn: IndexBuildConnection,
  runner: StatementRunner,
  schema: string,
  version: number,
): Promise<void> {
  const wanted = onlineIndexesThrough(version);
  if (wanted.length === 0) return;
  const builds = await READ_INDEX_BUILDS.run(runner, {
    schema,
    names: wanted.map((o) => o.index.name),
  });
  for (const [k, { version: from, index }] of wanted.entries()) {
    const build = builds[k];
    if (build?.state === 'valid' && build.recorded) continue;
    if (build?.state !== 'valid') {
      await conn.query(dropText(index.name, schema, false));
      await conn.query(createText(index, schema, false));
    }
    await RECORD_INDEX_BUILD_DONE.run(runner, { name: index.name, version: from });
  }
}

async function lockBuilds(runner: StatementRunner, schema: string): Promise<void> {
  while (!(await TRY_LOCK_INDEX_BUILDS.run(runner, { schema }))) {
    await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS));
  }
}

/**
 * Builds the online indexes through `version` that are missing or INVALID, one at a time with
 * `CREATE INDEX CONCURRENTLY` on `conn`, which must be one session outside any transaction
 * (writes to the table proceed meanwhile). An INVALID index (a build that failed, was cancelled
 * or died with its session) is dropped with `DROP INDEX CONCURRENTLY` first. Each build is
 * recorded in `gen_durable_index_builds` (start, finish or error); a session-level advisory lock
 * serialises two migrators. Throws IndexBuildError when a build fails: the index stays INVALID,
 * its error is recorded, and the next run rebuilds it.
 */
export async function buildIndexesOnline(
  conn: IndexBuildConnection,
  runner: StatementRunner,
  schema: string,
  version: number,
): Promise<void> {
  const wanted = onlineIndexesThrough(version);
  if (wanted.length === 0) return;
  const names = wanted.map((o) => o.index.name);
  const first = await READ_INDEX_BUILDS.run(runner, { schema, names });
  if (first.every((b) => b.state === 'valid' && b.recorded)) return;
  await lockBuilds(runner, schema);
  try {
    const builds = await READ_INDEX_BUILDS.run(runner, { schema, names });
    for (const [k, { version: from, index }] of wanted.entries()) {
      const build = builds[k];
      if (build?.state === 'valid') {
        if (!build.recorded) {
          await RECORD_INDEX_BUILD_DONE.run(runner, { name: index.name, version: from });
        }
        continue;
      }
      if (build?.state === 'building') {
        throw new IndexBuildError(schema, index.name, 'another session is building it');
      }
      await buildOne(conn, runner, schema, from, index, build?.state === 'invalid');
    }
  } finally {
    await UNLOCK_INDEX_BUILDS.run(runner, { schema });
  }
}

async function buildOne(
  conn: IndexBuildConnection,
  runner: StatementRunner,
  schema: string,
  version: number,
  index: ConcurrentIndex,
  invalid: boolean,
): Promise<void> {
  await RECORD_INDEX_BUILD_START.run(runner, { name: index.name, version });
  try {
    if (invalid) await conn.query(dropText(index.name, schema, true));
    await conn.query(createText(index, schema, true));
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    await RECORD_INDEX_BUILD_FAILED.run(runner, { name: index.name, error: reason }).catch(
      () => undefined,
    );
    throw new IndexBuildError(schema, index.name, reason, { cause: err });
  }
  const [after] = await READ_INDEX_BUILDS.run(runner, { schema, names: [index.name] });
  if (after?.state !== 'valid') {
    const reason = `the index is ${after?.state ?? 'missing'} after its build`;
    await RECORD_INDEX_BUILD_FAILED.run(runner, { name: index.name, error: reason });
    throw new IndexBuildError(schema, index.name, reason);
  }
  await RECORD_INDEX_BUILD_DONE.run(runner, { name: index.name, version });
}
