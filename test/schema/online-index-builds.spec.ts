import { IndexBuildError } from '../../lib/errors/index-build.error';
import { GenDurableMigration } from '../../lib/schema/gen-durable.migration';
import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { onlineIndexesThrough } from '../../lib/schema/index-builds';
import {
  type MigrationConnection,
  migrateDown,
  migrateUp,
  readSchemaIndexBuilds,
  readSchemaVersion,
} from '../../lib/schema/migrator';
import { GET_INSTANCE_BY_KEY } from '../../lib/sql/instance.sql';
import { renderStatement } from '../../lib/sql/statement';
import { bootEngine } from '../support/engine-harness';
import { openRawSession, type RawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Online index builds (docs/schema.md "Online index builds"): an increment's
// `concurrentIndexes` are built with CREATE INDEX CONCURRENTLY after the migration commits,
// tracked in gen_durable_index_builds; an interrupted build leaves an INVALID index that verify
// and the boot check report and the next migration rebuilds.

const INDEX = 'gen_durable_ended_key';
/** The last version without online indexes: the tests migrate to it, fill the table, then up. */
const BEFORE = (onlineIndexesThrough(CURRENT_SCHEMA_VERSION)[0]?.version ?? 1) - 1;
/**
 * The version whose increment declares the index. The specs that hold a write transaction
 * open migrate to it, not to the latest: a later increment's DDL (ALTER TABLE) would wait for
 * that transaction inside the migration's own, before any online build starts.
 */
const BUILT = BEFORE + 1;

function sessionConn(s: RawSession): MigrationConnection {
  return { query: (text, params) => s.exec(text, params), inTransaction: false };
}

async function indexRow(
  db: TestDatabase,
  schema: string,
): Promise<{ valid: boolean | null; finished: boolean; attempts: number; error: string | null }> {
  const { rows } = await db.pool.query<{
    valid: boolean | null;
    finished: boolean;
    attempts: number;
    error: string | null;
  }>(
    `SELECT (SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2) AS valid,
            b.finished_at IS NOT NULL AS finished, b.attempts, b.error
       FROM (SELECT 1) x LEFT JOIN ${schema}.gen_durable_index_builds b ON b.name = $2`,
    [schema, INDEX],
  );
  return rows[0]!;
}

/** Ended rows with keys (and some without), so the index has entries to build. */
async function fill(db: TestDatabase, schema: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO ${schema}.gen_durable (fsm, step, status, correlation_key, correlation_scope)
     SELECT 'f', 's', 'done', CASE WHEN k % 3 = 0 THEN NULL ELSE 'key-' || k END, '{runnable}'
       FROM generate_series(1, 2000) AS k`,
  );
}

describe('online index builds', () => {
  let db: TestDatabase;
  const sessions: RawSession[] = [];

  async function session(): Promise<RawSession> {
    const s = await openRawSession(db);
    sessions.push(s);
    return s;
  }

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.close();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('a migration from nothing builds the index in its transaction and records it', async () => {
    const m = await session();
    await migrateUp(sessionConn(m), { schema: 'fresh' });
    expect(await indexRow(db, 'fresh')).toEqual({
      valid: true,
      finished: true,
      attempts: 1,
      error: null,
    });
    expect(await readSchemaIndexBuilds(sessionConn(m), 'fresh', CURRENT_SCHEMA_VERSION)).toEqual([
      { name: INDEX, state: 'valid', recorded: true, error: null },
      { name: 'gen_durable_fair_live', state: 'valid', recorded: true, error: null },
      { name: 'gen_durable_parked', state: 'valid', recorded: true, error: null },
    ]);
  });

  it('an upgrade builds it CONCURRENTLY after the commit, valid and tracked; the key read uses it', async () => {
    const m = await session();
    await migrateUp(sessionConn(m), { schema: 'up', version: BEFORE });
    await fill(db, 'up');
    await migrateUp(sessionConn(m), { schema: 'up' });
    expect(await readSchemaVersion(sessionConn(m), 'up')).toBe(CURRENT_SCHEMA_VERSION);
    expect(await indexRow(db, 'up')).toEqual({
      valid: true,
      finished: true,
      attempts: 1,
      error: null,
    });
    // The statement the index is for plans on it.
    await db.pool.query('ANALYZE up.gen_durable');
    const plan = await db.pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (COSTS OFF) ${renderStatement(GET_INSTANCE_BY_KEY, 'up')}`,
      ['key-1'],
    );
    expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain(INDEX);
    // A second run finds it built and does nothing.
    await migrateUp(sessionConn(m), { schema: 'up' });
    expect((await indexRow(db, 'up')).attempts).toBe(1);
  });

  it('a cancelled build leaves an INVALID index: reported, recorded, rebuilt by the next run; writes proceed meanwhile', async () => {
    const m = await session();
    const writer = await session();
    const other = await session();
    await migrateUp(sessionConn(m), { schema: 'public', version: BEFORE });
    await fill(db, 'public');
    // An open write transaction: CREATE INDEX CONCURRENTLY waits for it after committing the
    // (still invalid) index's catalog entry.
    await writer.exec('BEGIN');
    await writer.exec(`UPDATE gen_durable SET attempt = attempt + 1 WHERE id = 1`);
    const migration = migrateUp(sessionConn(m), { schema: 'public', version: BUILT }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(await waitUntilBlockedBy(db, writer.pid)).toEqual([m.pid]);
    // The schema is already at the new version (the increments committed) and the index exists,
    // INVALID, while the build waits; writes from other sessions proceed.
    expect(await readSchemaVersion(sessionConn(other), 'public')).toBe(BUILT);
    const inserted = await other.exec<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, status, correlation_key, correlation_scope)
       VALUES ('f', 's', 'done', 'during', '{runnable}') RETURNING id`,
    );
    expect(inserted).toHaveLength(1);
    await other.exec(`UPDATE gen_durable SET state = '{"x":1}' WHERE id = 2`);
    expect(await readSchemaIndexBuilds(sessionConn(other), 'public', BUILT)).toEqual([
      { name: INDEX, state: 'building', recorded: false, error: null },
    ]);
    // Interrupt the build.
    await other.exec('SELECT pg_cancel_backend($1)', [m.pid]);
    const err = await migration;
    expect(err).toBeInstanceOf(IndexBuildError);
    expect(err).toMatchObject({ code: 'GD_INDEX_BUILD', schema: 'public', index: INDEX });
    await writer.exec('COMMIT');

    expect(await indexRow(db, 'public')).toEqual({
      valid: false,
      finished: false,
      attempts: 1,
      error: 'canceling statement due to user request',
    });
    expect(await readSchemaIndexBuilds(sessionConn(other), 'public', BUILT)).toEqual([
      {
        name: INDEX,
        state: 'invalid',
        recorded: false,
        error: 'canceling statement due to user request',
      },
    ]);

    // The next run drops the invalid index and builds it again.
    await migrateUp(sessionConn(m), { schema: 'public' });
    expect(await indexRow(db, 'public')).toEqual({
      valid: true,
      finished: true,
      attempts: 2,
      error: null,
    });
    // The row written during the build is in the rebuilt index: the key read finds it.
    const byKey = await GET_INSTANCE_BY_KEY.run(other, { correlationKey: 'during' });
    expect(byKey?.id).toBe(String(inserted[0]!.id));
  });

  it('the engine boots on an INVALID index, warning with its name; then migrate repairs it', async () => {
    // A real failed CONCURRENTLY build under the index's name: a UNIQUE variant that two ended
    // rows with one key and one end time violate, which PostgreSQL leaves behind INVALID.
    await db.pool.query('DROP INDEX gen_durable_ended_key');
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, correlation_key, updated_at)
       VALUES ('f', 's', 'done', 'twice', '2026-01-01'), ('f', 's', 'done', 'twice', '2026-01-01')`,
    );
    await expect(
      db.pool.query(
        `CREATE UNIQUE INDEX CONCURRENTLY gen_durable_ended_key ON gen_durable (correlation_key, updated_at)
          WHERE status NOT IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
            AND correlation_key IS NOT NULL`,
      ),
    ).rejects.toThrow(/could not create unique index/);
    const h = await bootEngine(db, []);
    try {
      expect(h.eventsOf('boot:warning').map((e) => e.metadata['warning'])).toContainEqual(
        'index gen_durable_ended_key of schema "public" is invalid: an online build did not finish (run the migration again to build it; docs/schema.md "Online index builds")',
      );
    } finally {
      await h.close();
    }
    const m = await session();
    await migrateUp(sessionConn(m));
    expect(await indexRow(db, 'public')).toMatchObject({ valid: true, finished: true });
  });

  it('two migrators at once: one builds, the other waits for its lock and finds it built', async () => {
    const a = await session();
    const b = await session();
    const writer = await session();
    await migrateUp(sessionConn(a), { schema: 'pair', version: BEFORE });
    await fill(db, 'pair');
    await writer.exec('BEGIN');
    await writer.exec(`UPDATE pair.gen_durable SET attempt = attempt + 1 WHERE id = 1`);
    const first = migrateUp(sessionConn(a), { schema: 'pair', version: BUILT });
    expect(await waitUntilBlockedBy(db, writer.pid)).toEqual([a.pid]);
    // b commits nothing new (already at the version) and polls the build lock a holds.
    const second = migrateUp(sessionConn(b), { schema: 'pair', version: BUILT });
    const { rows } = await db.pool.query<{ locked: boolean }>(
      `SELECT pg_try_advisory_lock(hashtext('gen_durable:index-builds:' || 'pair')) AS locked`,
    );
    expect(rows[0]!.locked).toBe(false);
    await writer.exec('COMMIT');
    await Promise.all([first, second]);
    expect(await indexRow(db, 'pair')).toEqual({
      valid: true,
      finished: true,
      attempts: 1,
      error: null,
    });
  });

  it('through a TypeORM QueryRunner: online outside a transaction, in the transaction inside one', async () => {
    const ds = await db.dataSource();
    const qr = ds.createQueryRunner();
    try {
      await GenDurableMigration.up(qr, { schema: 'orm', version: BEFORE });
      await fill(db, 'orm');
      await GenDurableMigration.up(qr, { schema: 'orm' });
      expect(await indexRow(db, 'orm')).toEqual({
        valid: true,
        finished: true,
        attempts: 1,
        error: null,
      });
      await GenDurableMigration.down(qr, { schema: 'orm', version: BEFORE });
      expect((await indexRow(db, 'orm').catch((e: Error) => e.message)) as string).toContain(
        'does not exist',
      );
      await qr.startTransaction();
      await GenDurableMigration.up(qr, { schema: 'orm' });
      await qr.commitTransaction();
      expect(await indexRow(db, 'orm')).toEqual({
        valid: true,
        finished: true,
        attempts: 1,
        error: null,
      });
    } finally {
      await qr.release();
    }
  });

  it('reverting drops the index and the tracking table', async () => {
    const m = await session();
    await migrateUp(sessionConn(m), { schema: 'back' });
    await migrateDown(sessionConn(m), { schema: 'back', version: BEFORE });
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'back' AND c.relname IN ($1, 'gen_durable_index_builds')`,
      [INDEX],
    );
    expect(rows[0]!.n).toBe(0);
    await migrateUp(sessionConn(m), { schema: 'back' });
    expect((await indexRow(db, 'back')).valid).toBe(true);
  });
});
