import type { Pool } from 'pg';

import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { migrateDown, migrateUp, readSchemaVersion } from '../../lib/schema/migrator';
import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { V017 } from '../../lib/schema/v017';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The upgrade to the archive's schema version (docs/archive.md "Upgrading a database with
// ended rows") under a running fleet: a version-13 database with ended and live rows; a
// scheduler keeps completing work while the migration's transaction is open (so the migration
// holds no lock the workers wait on); then the GC sweep moves the existing ended rows in
// batches while new work runs, and nothing is lost or run twice.

@DurableFsm({ name: 'upgrade-job', queue: 'upgrade-q', history: 'transitions' })
class JobFsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return done({ n: ctx.state.n });
  }
}

const ARCHIVE_VERSION = V017.version;

function conn(pool: Pool) {
  return {
    query: (text: string, params?: unknown[]) => pool.query(text, params),
    inTransaction: false,
  };
}

describe('upgrading a database with ended rows to the archive (docs/archive.md)', () => {
  let db: TestDatabase;
  let fleet: Harness | undefined;
  let maintenance: Harness | undefined;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await maintenance?.close();
    await fleet?.close();
    await db.drop();
  });

  const count = async (where: string, table = 'gen_durable'): Promise<number> =>
    Number(
      (await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${where}`))
        .rows[0]!.n,
    );

  /** Inserts `n` jobs through the fleet and waits (by SQL: no view exists yet) until all ended. */
  async function runJobs(from: number, n: number): Promise<string[]> {
    const ids = await fleet!.engine.insertAll(
      JobFsm,
      Array.from({ length: n }, (_, i) => ({ state: { n: from + i } })),
    );
    return ids;
  }

  const allDone = async (ids: readonly string[]) => {
    const { rows } = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM gen_durable WHERE id = ANY ($1::bigint[]) AND status = 'done'`,
      [ids],
    );
    return Number(rows[0]!.n) === ids.length;
  };

  it('creates the archive without blocking running work; the sweep then moves the old ended rows in batches while work goes on', async () => {
    await migrateUp(conn(db.pool), { version: ARCHIVE_VERSION - 1 });
    // A fleet of the version before: its workers' statements are the same (the migration adds
    // objects, it changes none the claim or the flush use). The version check is at boot only.
    await db.pool.query(`COMMENT ON TABLE gen_durable IS '${CURRENT_SCHEMA_VERSION}'`);
    fleet = await bootEngine(db, [JobFsm], { queues: { 'upgrade-q': 4 }, gc: false });
    await db.pool.query(`COMMENT ON TABLE gen_durable IS '${ARCHIVE_VERSION - 1}'`);

    // Ended rows from before the upgrade: done (with history), cancelled and failed; and live
    // rows no worker serves.
    const old = await runJobs(0, 300);
    await eventually(() => allDone(old), 30_000);
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, status, updated_at)
       SELECT 'upgrade-job', 'start', 'upgrade-idle', s::gen_durable_status, now() - interval '1 hour'
         FROM unnest(array_fill('cancelled'::text, ARRAY[20]) || array_fill('failed'::text, ARRAY[10])
                     || array_fill('runnable'::text, ARRAY[10])) AS s`,
    );
    expect(await count(`status = 'done'`)).toBe(300);
    expect(await count(`true`, 'gen_durable_history')).toBeGreaterThanOrEqual(300);

    // The migration's transaction stays open while the fleet completes 100 more jobs: the
    // migration holds no lock the claim, the step's outcome or an insert waits on.
    const migration = await db.pool.connect();
    try {
      await migration.query('BEGIN');
      await migrateUp(
        { query: (text, params) => migration.query(text, params), inTransaction: true },
        { version: ARCHIVE_VERSION },
      );
      const during = await runJobs(1000, 100);
      await eventually(() => allDone(during), 30_000);
      await migration.query('COMMIT');
    } finally {
      migration.release();
    }
    expect(await readSchemaVersion(conn(db.pool), 'public')).toBe(ARCHIVE_VERSION);
    // Nothing moved inside the migration: the sweep does it.
    expect(await count('true', 'gen_durable_archive')).toBe(0);
    expect(ARCHIVE_VERSION).toBeLessThanOrEqual(CURRENT_SCHEMA_VERSION);
    // The later increments (an online index since), for the maintenance node's boot check.
    await migrateUp(conn(db.pool));

    // A maintenance node (GC on, batches of 64) sweeps while the fleet runs 200 more jobs.
    maintenance = await bootEngine(db, [JobFsm], {
      name: 'upgrade-maintenance',
      queues: {},
      gc: { interval: 3_600_000, batch: 64, archiveAfter: 0 },
    });
    const after = runJobs(2000, 200);
    await maintenance.engine.runtime.gc!.sweep();
    const late = await after;
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM gen_durable_all WHERE id = ANY ($1::bigint[]) AND status = 'done'`,
        [late],
      );
      return Number(rows[0]!.n) === late.length;
    }, 30_000);
    await maintenance.engine.runtime.gc!.sweep();

    // Every done row left the hot table; failed, cancelled and live rows stayed.
    expect(await count(`status = 'done'`)).toBe(0);
    expect(await count(`status = 'cancelled'`)).toBe(20);
    expect(await count(`status = 'failed'`)).toBe(10);
    expect(await count(`status = 'runnable'`)).toBe(10);
    expect(await count(`status = 'done'`, 'gen_durable_archive')).toBe(600);
    expect(await count(`status = 'cancelled'`, 'gen_durable_archive')).toBe(0);
    // Nothing lost, nothing twice: each job once, with its own result.
    const { rows: jobs } = await db.pool.query<{ n: string; distinct_n: string; ok: boolean }>(
      `SELECT count(*) AS n, count(DISTINCT (state->>'n')) AS distinct_n,
              bool_and(result->'n' = state->'n') AS ok
         FROM gen_durable_all WHERE fsm = 'upgrade-job' AND status = 'done'`,
    );
    expect(jobs).toEqual([{ n: '600', distinct_n: '600', ok: true }]);
    // Their history went with them, and reads find an old instance and its history.
    expect(await count('true', 'gen_durable_history')).toBe(0);
    const first = await fleet.engine.get(old[0]!);
    expect(first?.status).toBe('done');
    expect((await fleet.engine.history(old[0]!)).length).toBeGreaterThan(0);
    expect(
      maintenance.eventsOf('gc:archived').reduce((n, e) => n + e.measurements['instances']!, 0),
    ).toBe(600);
  });

  it('down to version 13 puts the archived rows, their history and chunks back into the hot tables', async () => {
    await maintenance?.close();
    maintenance = undefined;
    await fleet?.close();
    fleet = undefined;
    const history = await count('true', 'gen_durable_history_archive');
    expect(history).toBeGreaterThan(0);
    await migrateDown(conn(db.pool), { version: ARCHIVE_VERSION - 1 });
    expect(await readSchemaVersion(conn(db.pool), 'public')).toBe(ARCHIVE_VERSION - 1);
    expect(await count(`status = 'done'`)).toBe(600);
    expect(await count(`status = 'cancelled'`)).toBe(20);
    expect(await count('true', 'gen_durable_history')).toBe(history);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE 'gen_durable%archive%'`,
    );
    expect(rows).toEqual([{ n: 0 }]);
  });
});
