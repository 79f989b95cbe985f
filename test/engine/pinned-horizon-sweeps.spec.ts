import type { PoolClient } from 'pg';

import { SqlExecutor } from '../../lib/db/sql-executor';
import { ARCHIVE_FLOOR_SLACK_MS, ArchiveSweep } from '../../lib/runtime/archive-sweep';
import { Reaper, REAP_FLOOR_SLACK_MS } from '../../lib/runtime/reaper';
import { FULL_SWEEP_EVERY } from '../../lib/runtime/sweep-floor';
import { ARCHIVE_EXTEND, ARCHIVE_MOVE } from '../../lib/sql/archive.sql';
import { REAP_EXPIRED } from '../../lib/sql/lease.sql';
import type { TypedStatement } from '../../lib/sql/statement';
import { Telemetry } from '../../lib/telemetry/telemetry';
import { explainBuffers } from '../support/explain-plan';
import { insertRowInStatus, pinHorizon, unpinHorizon } from '../support/rows';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The two periodic sweeps over a time-ordered index — the reaper over gen_durable_lease
// (docs/design.md §17.2), the archive's move over gen_durable_gc (docs/archive.md) — under a
// pinned xmin horizon. Every claim and heartbeat leaves a dead lease entry in the past, every
// moved row a dead gc entry at the low end; none can be pruned while the pin holds, and a scan
// from the low end visits each one's heap tuple: a 60-minute soak measured the reaper at
// 871 ms per sweep after 15 minutes of pin, the archive's move at 0.75 s and 224 000 buffers.
// Each sweep starts at its floor (lib/runtime/sweep-floor.ts): the range since its previous
// sweep, with a full sweep at least every tenth time for the rows left behind.

const DAY = 86_400_000;
const ROWS = 20_000;

describe('periodic sweeps under a pinned horizon', () => {
  let db: TestDatabase;
  let client: PoolClient;
  let pin: PoolClient;
  let sql: SqlExecutor;
  const telemetry = new Telemetry('pinned-sweeps');

  beforeAll(async () => {
    db = await createTestDatabase();
    sql = new SqlExecutor(db.pool, {
      schema: 'public',
      preparedStatements: true,
      statementTimeoutMs: 30_000,
    });
    client = await db.pool.connect();
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, status)
       SELECT 'f', 'a', 'q', 'runnable' FROM generate_series(1, ${ROWS})`,
    );
    await ARCHIVE_EXTEND.run(sql, { aheadMs: 2 * DAY, grain: 'hour' });
    // The statistics a fleet has most of the time: few rows executing, few ended.
    await db.pool.query('ANALYZE gen_durable');
    pin = await pinHorizon(db.pool);
    // 20 000 rows claimed (their leases since run out) and ended (since moved or retried),
    // four times, while the pin holds every version: 80 000 dead entries in each index, all
    // in the sweeps' ranges, behind their floors.
    for (let round = 0; round < 4; round++) {
      await db.pool.query(
        `UPDATE gen_durable SET status = 'executing', locked_by = 'w',
                lease_expires_at = now() - make_interval(secs => 100 + $1::int)`,
        [round],
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', locked_by = NULL, lease_expires_at = NULL,
                updated_at = now() - make_interval(secs => 200 + $1::int)`,
        [round],
      );
      await db.pool.query(`UPDATE gen_durable SET status = 'runnable', updated_at = now()`);
    }
  });
  afterAll(async () => {
    await unpinHorizon(pin);
    client.release();
    await db.drop();
  });

  async function dbNow(): Promise<Date> {
    const { rows } = await db.pool.query<{ now: Date }>('SELECT now() AS now');
    return rows[0]!.now;
  }

  /** Shared buffers the statement touched, prepared and run six times (the generic plan). */
  const buffers = <I>(statement: TypedStatement<I, unknown>, input: I): Promise<number> =>
    explainBuffers(client, statement, input, { runs: 6 });

  const reap = (from: Date | null) => ({
    maxReaps: 5,
    limit: 10_000,
    spreadMs: 0,
    from,
  });
  const archive = {
    afterMs: 0,
    limit: 1_000,
    retention: { done: DAY, failed: DAY, cancelled: DAY },
    overrides: [],
  };

  it('the reaper from its floor reads few buffers where a full sweep walks the dead leases', async () => {
    const full = await buffers(REAP_EXPIRED, reap(null));
    const floor = new Date((await dbNow()).getTime() - REAP_FLOOR_SLACK_MS);
    const bounded = await buffers(REAP_EXPIRED, reap(floor));
    expect(full).toBeGreaterThan(1_000);
    expect(bounded).toBeLessThan(300);
  });

  it('the archive move from its floor reads few buffers where a full pass walks the moved rows', async () => {
    const full = await buffers(ARCHIVE_MOVE, { ...archive, from: null });
    const floor = new Date((await dbNow()).getTime() - ARCHIVE_FLOOR_SLACK_MS);
    const bounded = await buffers(ARCHIVE_MOVE, { ...archive, from: floor });
    expect(full).toBeGreaterThan(1_000);
    expect(bounded).toBeLessThan(300);
  });

  /** A row of its own fsm straight into `executing`, its lease `leaseAgoMs` in the past. */
  async function expiredRow(leaseAgoMs: number, extra = ''): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, claim_seq, lease_expires_at${extra === '' ? '' : ', parent_id, cancel_requested_at'})
       VALUES ('reaped', 'a', 'rq', 'executing', 'gone', 1, now() - make_interval(secs => $1::float8 / 1000)${extra})
       RETURNING id`,
      [leaseAgoMs],
    );
    return rows[0]!.id;
  }

  async function statusOf(id: string): Promise<string | undefined> {
    const { rows } = await db.pool.query<{ status: string }>(
      'SELECT status::text FROM gen_durable WHERE id = $1',
      [id],
    );
    return rows[0]?.status;
  }

  function reaper(): Reaper {
    return new Reaper(
      sql,
      60_000,
      5,
      telemetry,
      () => undefined,
      () => undefined,
    );
  }

  it('the reaper takes a lease that expires in its floor at once, one behind it at the next full sweep', async () => {
    const r = reaper();
    await r.sweep('floor'); // the first sweep is full
    const inRange = await expiredRow(1_000);
    const behind = await expiredRow(3_600_000);
    expect((await r.sweep('floor')).reaped).toBe(1);
    expect(await statusOf(inRange)).toBe('runnable');
    // Sweeps 3 to 10 start at their floors; the 11th is full.
    for (let sweep = 3; sweep <= FULL_SWEEP_EVERY; sweep++) {
      expect((await r.sweep('floor')).reaped).toBe(0);
      expect(await statusOf(behind)).toBe('executing');
    }
    expect((await r.sweep('floor')).reaped).toBe(1);
    expect(await statusOf(behind)).toBe('runnable');
  });

  it('a sweep called directly is full', async () => {
    const r = reaper();
    await r.sweep('floor');
    const behind = await expiredRow(3_600_000);
    expect((await r.sweep()).reaped).toBe(1);
    expect(await statusOf(behind)).toBe('runnable');
  });

  it('a row left because its parent was busy keeps the floor at its lease: the next sweep takes it', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, children_pending)
       VALUES ('reaped', 'a', 'rq', 'awaiting_children', 1) RETURNING id`,
    );
    const parent = rows[0]!.id;
    // Its cancel was requested: the reap ends it, which takes its parent's lock too.
    const child = await expiredRow(3_600_000, `, ${parent}, now()`);
    const r = reaper();
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM gen_durable WHERE id = $1 FOR UPDATE', [parent]);
      await r.sweep('floor'); // full: sees the child, leaves it
      expect(await statusOf(child)).toBe('executing');
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await r.sweep('floor'); // from its floor, lowered to the child's lease
    expect(await statusOf(child)).toBe('cancelled');
  });

  /** A row of its own fsm straight into a status, ended `agoMs` ago. */
  const endedRow = (status: string, agoMs: number, parentId: string | null = null) =>
    insertRowInStatus(db.pool, {
      status,
      ageMs: agoMs,
      parentId,
      fsm: 'archived',
      step: 'a',
      queue: 'aq',
    });

  async function isHot(id: string): Promise<boolean> {
    const { rows } = await db.pool.query('SELECT 1 FROM gen_durable WHERE id = $1', [id]);
    return rows.length === 1;
  }

  it('the archive moves a row ended in its floor at once, one left behind (its parent live) by a later full pass', async () => {
    const sweep = new ArchiveSweep(sql, {
      grain: 'hour',
      afterMs: 0,
      batch: 1_000,
      retention: { done: DAY, failed: DAY, cancelled: DAY },
      overrides: [],
    });
    const parent = await endedRow('awaiting_children', 0);
    const child = await endedRow('done', 3_600_000, parent);
    await sweep.run(() => false, 'floor'); // the first pass is full: the child's parent is live
    expect(await isHot(child)).toBe(true);
    // The parent ended half an hour ago, behind every floor to come.
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', children_pending = 0,
              updated_at = now() - interval '30 minutes' WHERE id = $1`,
      [parent],
    );
    const recent = await endedRow('done', 0);
    expect((await sweep.run(() => false, 'floor')).moved.instances).toBe(1);
    expect(await isHot(recent)).toBe(false);
    // Passes 3 to 10 start at their floors, behind which the child waits (and its parent for it).
    for (let pass = 3; pass <= FULL_SWEEP_EVERY; pass++) {
      expect((await sweep.run(() => false, 'floor')).moved.instances).toBe(0);
      expect(await isHot(child)).toBe(true);
    }
    expect((await sweep.run(() => false, 'floor')).moved.instances).toBe(1);
    expect(await isHot(child)).toBe(false);
    // The floor is lowered to the end of the parent whose child left: the next pass takes it.
    expect((await sweep.run(() => false, 'floor')).moved.instances).toBe(1);
    expect(await isHot(parent)).toBe(false);
  });
});
