import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Pool, PoolClient } from 'pg';

import { GenDurableMigration } from '../../lib/schema/gen-durable.migration';
import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { migrateDown, migrateUp, readSchemaVersion } from '../../lib/schema/migrator';
import { dumpSchema } from '../support/schema-dump';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

const DUMP_FILE = join(__dirname, '..', 'schema.sql');

function conn(client: PoolClient | Pool) {
  return {
    query: (text: string, params?: unknown[]) => client.query(text, params),
    inTransaction: false,
  };
}

async function objectCount(pool: Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)
          + (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1)
          + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1) AS n`,
    [schema],
  );
  return Number(rows[0]?.n);
}

describe('GenDurableMigration', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('creates exactly the committed schema (test/schema.sql) and records the version', async () => {
    await migrateUp(conn(db.pool), { schema: 'public' });
    expect(await readSchemaVersion(conn(db.pool), 'public')).toBe(CURRENT_SCHEMA_VERSION);
    const dump = await dumpSchema(db.pool, 'public');
    if (process.env['UPDATE_SCHEMA_DUMP'] === '1') writeFileSync(DUMP_FILE, dump);
    expect(dump).toEqual(readFileSync(DUMP_FILE, 'utf8'));
  });

  it('is a no-op when run twice', async () => {
    const before = await dumpSchema(db.pool, 'public');
    await migrateUp(conn(db.pool));
    expect(await dumpSchema(db.pool, 'public')).toEqual(before);
  });

  it('lets two concurrent ups both succeed on a fresh schema', async () => {
    const [a, b] = await Promise.all([db.pool.connect(), db.pool.connect()]);
    try {
      await Promise.all([
        migrateUp(conn(a), { schema: 'race' }),
        migrateUp(conn(b), { schema: 'race' }),
      ]);
    } finally {
      a.release();
      b.release();
    }
    expect(await readSchemaVersion(conn(db.pool), 'race')).toBe(CURRENT_SCHEMA_VERSION);
    await migrateDown(conn(db.pool), { schema: 'race' });
  });

  it('puts every object in the configured schema, through a TypeORM QueryRunner', async () => {
    const ds = await db.dataSource();
    const qr = ds.createQueryRunner();
    try {
      await GenDurableMigration.up(qr, { schema: 'jobs' });
    } finally {
      await qr.release();
    }
    const jobs = await dumpSchema(db.pool, 'jobs');
    expect(jobs).toEqual(readFileSync(DUMP_FILE, 'utf8'));
    const { rows } = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'jobs' AND c.relname LIKE 'gen_durable%'`,
    );
    expect(Number(rows[0]?.n)).toBeGreaterThan(0);
  });

  it('runs inside a TypeORM migration transaction without opening its own', async () => {
    const ds = await db.dataSource();
    const qr = ds.createQueryRunner();
    try {
      await qr.startTransaction();
      await GenDurableMigration.up(qr, { schema: 'in_tx' });
      await qr.rollbackTransaction();
    } finally {
      await qr.release();
    }
    expect(await objectCount(db.pool, 'in_tx')).toBe(0);
    expect(await readSchemaVersion(conn(db.pool), 'in_tx')).toBe(0);
  });

  it('down removes every object it created, including a schema it created', async () => {
    await migrateDown(conn(db.pool), { schema: 'jobs' });
    const { rows } = await db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'jobs'`);
    expect(rows).toHaveLength(0);
    await migrateDown(conn(db.pool), { schema: 'public' });
    expect(await objectCount(db.pool, 'public')).toBe(0);
    expect(await readSchemaVersion(conn(db.pool), 'public')).toBe(0);
    // and up again restores it
    await migrateUp(conn(db.pool));
    expect(await dumpSchema(db.pool, 'public')).toEqual(readFileSync(DUMP_FILE, 'utf8'));
  });

  it('v2 adds `signaled` and marks the rows of a v1 schema that already hold signals', async () => {
    await migrateUp(conn(db.pool), { schema: 'v1', version: 1 });
    expect(await readSchemaVersion(conn(db.pool), 'v1')).toBe(1);
    const { rows: made } = await db.pool.query<{ id: string }>(
      `INSERT INTO v1.gen_durable (fsm, step) SELECT 'job', 'perform' FROM generate_series(1, 3) RETURNING id`,
    );
    const [withInbox, withConsumed, without] = made.map((r) => r.id);
    await db.pool.query(`INSERT INTO v1.signals (target_id, name) VALUES ($1, 'go')`, [withInbox]);
    await db.pool.query(
      `INSERT INTO v1.signals (target_id, name, consumed_at) VALUES ($1, 'go', now())`,
      [withConsumed],
    );
    await migrateUp(conn(db.pool), { schema: 'v1', version: 2 });
    expect(await readSchemaVersion(conn(db.pool), 'v1')).toBe(2);
    const { rows } = await db.pool.query(`SELECT id, signaled FROM v1.gen_durable ORDER BY id`);
    expect(rows).toEqual([
      { id: withInbox, signaled: true },
      { id: withConsumed, signaled: true },
      { id: without, signaled: false },
    ]);
    // A signal written by anything but the engine's delivery (an old node, a hand insert) marks
    // its target too: the trigger.
    await db.pool.query(`INSERT INTO v1.signals (target_id, name) VALUES ($1, 'late')`, [without]);
    const { rows: marked } = await db.pool.query(
      `SELECT signaled FROM v1.gen_durable WHERE id = $1`,
      [without],
    );
    expect(marked).toEqual([{ signaled: true }]);
    await migrateDown(conn(db.pool), { schema: 'v1', version: 1 });
    expect(await readSchemaVersion(conn(db.pool), 'v1')).toBe(1);
    const { rows: columns } = await db.pool.query(
      `SELECT 1 FROM information_schema.columns WHERE table_schema = 'v1' AND table_name = 'gen_durable' AND column_name = 'signaled'`,
    );
    expect(columns).toHaveLength(0);
    const { rows: functions } = await db.pool.query(
      `SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'v1'`,
    );
    expect(functions).toHaveLength(0);
    await migrateDown(conn(db.pool), { schema: 'v1' });
  });

  it('v4 adds cancelled alone and v5 uses it in the same transaction; v5 down turns cancelled rows into failed', async () => {
    // v3 → v5 in one transaction (as inside a host's TypeORM migration): v5 never names the new value.
    await migrateUp(conn(db.pool), { schema: 'cx', version: 3 });
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await migrateUp(
        {
          query: (text: string, params?: unknown[]) => client.query(text, params),
          inTransaction: true,
        },
        { schema: 'cx', version: 5 },
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await readSchemaVersion(conn(db.pool), 'cx')).toBe(5);
    const { rows: made } = await db.pool.query<{ id: string }>(
      `INSERT INTO cx.gen_durable (fsm, step, status, cancel_reason) VALUES ('job', 'perform', 'cancelled', 'why') RETURNING id`,
    );
    await migrateDown(conn(db.pool), { schema: 'cx', version: 4 });
    const { rows } = await db.pool.query(
      `SELECT status::text, last_error FROM cx.gen_durable WHERE id = $1`,
      [made[0]!.id],
    );
    expect(rows).toEqual([{ status: 'failed', last_error: 'cancelled: why' }]);
    const { rows: columns } = await db.pool.query(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'cx' AND column_name LIKE 'cancel%'`,
    );
    expect(columns).toEqual([]);
    await migrateDown(conn(db.pool), { schema: 'cx' });
  });

  it('rejects a version it does not ship', async () => {
    await expect(migrateUp(conn(db.pool), { version: CURRENT_SCHEMA_VERSION + 1 })).rejects.toThrow(
      RangeError,
    );
  });
});
