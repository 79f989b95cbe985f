import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { Pool } from 'pg';

import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { migrateDown, migrateUp, readSchemaVersion } from '../../lib/schema/migrator';
import { bootEngine } from '../support/engine-harness';
import { dumpSchema } from '../support/schema-dump';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Schema version 10 (docs/design.md §3.6): every object the engine creates carries the
// `gen_durable` prefix, a fresh install never creates an unprefixed one, and a version-9
// schema is renamed in place, data included; `down` to 9 restores the old names.

const DUMP = readFileSync(join(__dirname, '..', 'schema.sql'), 'utf8');

function conn(pool: Pool) {
  return {
    query: (text: string, params?: unknown[]) => pool.query(text, params),
    inTransaction: false,
  };
}

/** Every named object in `schema`, as `kind name`: relations, constraints, functions, triggers, types. */
async function objectsOf(pool: Pool, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ object: string }>(
    `SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence'
                           ELSE 'relation(' || c.relkind::text || ')' END || ' ' || c.relname AS object
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'constraint ' || con.conname
       FROM pg_constraint con JOIN pg_namespace n ON n.oid = con.connamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'function ' || p.proname
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'trigger ' || t.tgname
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND NOT t.tgisinternal
     UNION ALL
     SELECT CASE WHEN t.typcategory = 'A' THEN 'array type ' ELSE 'type ' END || t.typname
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1
     ORDER BY 1`,
    [schema],
  );
  return rows.map((r) => r.object);
}

/** The rows of `table` in `schema`, in id order, as JSON (every column). */
async function rowsOf(pool: Pool, schema: string, table: string): Promise<unknown[]> {
  const { rows } = await pool.query<{ row: unknown }>(
    `SELECT to_jsonb(t) AS row FROM "${schema}"."${table}" t ORDER BY t.id`,
  );
  return rows.map((r) => r.row);
}

/**
 * A version-9 schema `schema` holding what a version-9 engine leaves behind: an instance not yet
 * run with a signal already in its inbox, one parked on `paid`, and a finished one whose signal
 * was consumed. Written by hand: a version-9 engine's SQL no longer exists in this release.
 */
async function version9WithData(
  pool: Pool,
  schema: string,
): Promise<{ early: string; parked: string; finished: string }> {
  await migrateUp(conn(pool), { schema, version: 9 });
  const insert = async (values: string): Promise<string> =>
    (
      await pool.query<{ id: string }>(
        `INSERT INTO "${schema}".gen_durable (fsm, step, status, awaits, result, correlation_key, correlation_scope)
         VALUES ${values} RETURNING id`,
      )
    ).rows[0]!.id;
  const early = await insert(
    `('upgrade-checkout', 'start', 'runnable', NULL, NULL, 'order:early', '{runnable,executing,awaiting_signal}')`,
  );
  const parked = await insert(
    `('upgrade-checkout', 'ship', 'awaiting_signal', '{paid}', NULL, 'order:parked', '{runnable,executing,awaiting_signal}')`,
  );
  const finished = await insert(
    `('upgrade-checkout', 'ship', 'done', NULL, '{"paid":[1]}', 'order:finished', '{}')`,
  );
  await pool.query(
    `INSERT INTO "${schema}".signals (target_id, name, payload, dedup_key, consumed_at, trace_context)
     VALUES ($1, 'paid', '{"amount": 5}', 'psp-1', NULL, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
            ($2, 'paid', '1', NULL, now(), NULL)`,
    [early, finished],
  );
  return { early, parked, finished };
}

@DurableFsm({ name: 'upgrade-checkout' })
class UpgradeCheckoutFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() ship(ctx: StepContext) {
    return done({ paid: ctx.awaited.map((s) => s.payload) });
  }
}

/**
 * A version-9 row as the current version shows it: its new columns (lib/schema/v011.ts,
 * v012.ts, v015.ts) NULL, its fairness weight the default 1.
 */
function withNewColumns(row: unknown): unknown {
  return {
    ...(row as object),
    held_at: null,
    held_reason: null,
    dedup_until: null,
    deadline_at: null,
    fairness_key: null,
    fairness_weight: 1,
    sequence_key: null,
    on_head_failure: null,
  };
}

describe('every object carries the gen_durable prefix (schema version 10)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('a fresh install creates only gen_durable… objects: tables, indexes, sequences, constraints, functions, triggers, types', async () => {
    await migrateUp(conn(db.pool), { schema: 'fresh' });
    const objects = await objectsOf(db.pool, 'fresh');
    // Sanity: the listing sees each kind the migration creates.
    for (const kind of ['table', 'index', 'sequence', 'constraint', 'function', 'trigger']) {
      expect(objects.some((o) => o.startsWith(`${kind} `))).toBe(true);
    }
    expect(objects).toContain('type gen_durable_status');
    expect(objects).toContain('table gen_durable_signals');
    // An array type is named `_` + its element type's name.
    const unprefixed = objects.filter((o) => !/^(array type _|[a-zA-Z()]+ )gen_durable/.test(o));
    expect(unprefixed).toEqual([]);
    expect(await dumpSchema(db.pool, 'fresh')).toEqual(DUMP);
    await migrateDown(conn(db.pool), { schema: 'fresh' });
  });

  it('installs beside a host that already has its own signals table, durable_status type and their index names, and leaves them untouched', async () => {
    await db.pool.query(`CREATE SCHEMA host`);
    await db.pool.query(`CREATE TYPE host.durable_status AS ENUM ('on', 'off')`);
    await db.pool.query(
      `CREATE TABLE host.signals (
         id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
         target_id bigint NOT NULL,
         name      text NOT NULL,
         state     host.durable_status NOT NULL DEFAULT 'on',
         CONSTRAINT signals_target_dedup UNIQUE (target_id, name)
       )`,
    );
    await db.pool.query(`CREATE INDEX signals_target ON host.signals (target_id)`);
    await db.pool.query(`CREATE INDEX signals_inbox ON host.signals (name)`);
    await db.pool.query(`INSERT INTO host.signals (target_id, name) VALUES (1, 'traffic-light')`);
    const hostObjects = await objectsOf(db.pool, 'host');
    const hostRows = await rowsOf(db.pool, 'host', 'signals');

    await migrateUp(conn(db.pool), { schema: 'host' });
    expect(await readSchemaVersion(conn(db.pool), 'host')).toBe(CURRENT_SCHEMA_VERSION);
    const both = await objectsOf(db.pool, 'host');
    expect(both).toEqual(expect.arrayContaining(hostObjects));
    expect(both.filter((o) => !hostObjects.includes(o))).toEqual(
      await objectsOfFreshInstall(db.pool),
    );
    expect(await rowsOf(db.pool, 'host', 'signals')).toEqual(hostRows);

    // The engine's inbox and the host's table are two tables.
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO host.gen_durable (fsm, step) VALUES ('f', 's') RETURNING id`,
    );
    await db.pool.query(
      `INSERT INTO host.gen_durable_signals (target_id, name) VALUES ($1, 'go')`,
      [rows[0]!.id],
    );
    expect(await rowsOf(db.pool, 'host', 'signals')).toEqual(hostRows);

    // Reverting everything removes only the engine's objects (it never renames back to
    // `signals` on the way down to nothing), and keeps the host's schema.
    await migrateDown(conn(db.pool), { schema: 'host' });
    expect(await objectsOf(db.pool, 'host')).toEqual(hostObjects);
    expect(await rowsOf(db.pool, 'host', 'signals')).toEqual(hostRows);
    await db.pool.query(`DROP SCHEMA host CASCADE`);
  });

  it('upgrades a version-9 schema with data in place: the same rows under the new names, the schema equal to a fresh one', async () => {
    await version9WithData(db.pool, 'nine');
    const instances = await rowsOf(db.pool, 'nine', 'gen_durable');
    const inbox = await rowsOf(db.pool, 'nine', 'signals');
    expect(inbox).toHaveLength(2);

    await migrateUp(conn(db.pool), { schema: 'nine' });
    expect(await readSchemaVersion(conn(db.pool), 'nine')).toBe(CURRENT_SCHEMA_VERSION);
    expect(await dumpSchema(db.pool, 'nine')).toEqual(DUMP);
    expect(await objectsOf(db.pool, 'nine')).toEqual(await objectsOfFreshInstall(db.pool));
    expect(await rowsOf(db.pool, 'nine', 'gen_durable')).toEqual(instances.map(withNewColumns));
    expect(await rowsOf(db.pool, 'nine', 'gen_durable_signals')).toEqual(inbox);
    // The identity sequence kept its value under its new name.
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO nine.gen_durable_signals (target_id, name) SELECT id, 'late' FROM nine.gen_durable LIMIT 1 RETURNING id`,
    );
    expect(Number(rows[0]!.id)).toBe(inbox.length + 1);
  });

  it('down from 10 to 9 restores the version-9 names with the data; up again renames them back', async () => {
    await version9WithData(db.pool, 'round');
    await migrateUp(conn(db.pool), { schema: 'straight9', version: 9 });
    const nine = await dumpSchema(db.pool, 'straight9');
    expect(nine).toContain('TABLE signals');
    expect(nine).toContain('TYPE durable_status ENUM');
    const instances = await rowsOf(db.pool, 'round', 'gen_durable');
    const inbox = await rowsOf(db.pool, 'round', 'signals');

    await migrateUp(conn(db.pool), { schema: 'round' });
    await migrateDown(conn(db.pool), { schema: 'round', version: 9 });
    expect(await readSchemaVersion(conn(db.pool), 'round')).toBe(9);
    expect(await dumpSchema(db.pool, 'round')).toEqual(nine);
    expect(await rowsOf(db.pool, 'round', 'gen_durable')).toEqual(instances);
    expect(await rowsOf(db.pool, 'round', 'signals')).toEqual(inbox);

    // A schema installed fresh at 10 goes down to the same version-9 shape.
    await migrateUp(conn(db.pool), { schema: 'fresh10' });
    await migrateDown(conn(db.pool), { schema: 'fresh10', version: 9 });
    expect(await dumpSchema(db.pool, 'fresh10')).toEqual(nine);

    await migrateUp(conn(db.pool), { schema: 'round' });
    expect(await dumpSchema(db.pool, 'round')).toEqual(DUMP);
    expect(await rowsOf(db.pool, 'round', 'gen_durable_signals')).toEqual(inbox);
    for (const schema of ['round', 'straight9', 'fresh10']) {
      await migrateDown(conn(db.pool), { schema });
    }
  });

  it('down to 9 refuses, changing nothing, when the host has since created a signals table of its own', async () => {
    await migrateUp(conn(db.pool), { schema: 'taken' });
    await db.pool.query(`CREATE TABLE taken.signals (id int)`);
    await expect(migrateDown(conn(db.pool), { schema: 'taken', version: 9 })).rejects.toMatchObject(
      { code: '42P07' },
    );
    expect(await readSchemaVersion(conn(db.pool), 'taken')).toBe(CURRENT_SCHEMA_VERSION);
    expect(await objectsOf(db.pool, 'taken')).toContain('table gen_durable_signals');
    await migrateDown(conn(db.pool), { schema: 'taken' });
    expect(await objectsOf(db.pool, 'taken')).toEqual([
      'array type _signals',
      'table signals',
      'type signals',
    ]);
    await db.pool.query(`DROP SCHEMA taken CASCADE`);
  });

  /** The objects of a fresh install, listed from a scratch schema. */
  async function objectsOfFreshInstall(pool: Pool): Promise<string[]> {
    await migrateUp(conn(pool), { schema: 'reference' });
    const objects = await objectsOf(pool, 'reference');
    await migrateDown(conn(pool), { schema: 'reference' });
    return objects;
  }
});

describe('an engine on a schema upgraded from version 9', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('consumes the signal delivered before the upgrade, wakes the instance parked before it, and keeps the finished one', async () => {
    const { early, parked, finished } = await version9WithData(db.pool, 'public');
    await migrateUp(conn(db.pool));
    const t = await bootEngine(db, [UpgradeCheckoutFsm]);
    try {
      expect(await t.engine.await(early, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { paid: [{ amount: 5 }] },
      });
      expect(await t.engine.get({ id: parked })).toMatchObject({ status: 'awaiting_signal' });
      await t.engine.signal({ correlationKey: 'order:parked' }, 'paid', { amount: 7 });
      expect(await t.engine.await(parked, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { paid: [{ amount: 7 }] },
      });
      expect(await t.engine.await(finished, { until: 'terminal' })).toEqual({
        kind: 'done',
        result: { paid: [1] },
      });
      // Every signal, delivered before the upgrade or after, is consumed in its row.
      const { rows } = await db.pool.query(
        `SELECT target_id, name, consumed_at IS NOT NULL AS consumed FROM gen_durable_signals ORDER BY id`,
      );
      expect(rows).toEqual([
        { target_id: early, name: 'paid', consumed: true },
        { target_id: finished, name: 'paid', consumed: true },
        { target_id: parked, name: 'paid', consumed: true },
      ]);
    } finally {
      await t.close();
    }
  });
});
