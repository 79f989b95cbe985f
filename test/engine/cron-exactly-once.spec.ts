import { done, DurableCron, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { openRawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29 "exactly once, no leader": every engine ticks; a fire is one statement that
// advances next_fire_at by compare-and-set and inserts from that update's result, so engines
// firing the same occurrence at the same instant insert it once. The races are forced on real
// connections: three engines' ticks started together, and three ticks queued behind a second
// session that holds the schedule's row lock. The correlation key cron:<name>:<instant> is the
// second guard: an occurrence fired once is not fired again even when next_fire_at is set back
// (two definitions of one name during a rolling deploy).

@DurableCron('* * * * * *', { name: 'every-second', missed: 'all', maxCatchup: 100 })
@DurableFsm({ name: 'ticked', queue: 'cron-none' })
class TickedFsm {
  @Step() start(ctx: StepContext<{ _cron: { at: string } }>) {
    return done({ at: ctx.state._cron.at });
  }
}

/** No scheduler, reaper or GC: no ticker runs, the test calls each engine's tick itself. */
const QUIET = { queues: {}, reaper: false, gc: false, poke: 'none' } as const;

describe('cron: exactly one instance per occurrence across engines (docs/design.md §29)', () => {
  let db: TestDatabase;
  let engines: Harness[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    for (const name of ['cron-a', 'cron-b', 'cron-c']) {
      engines.push(await bootEngine(db, [TickedFsm], { ...QUIET, name }));
    }
  });
  afterAll(async () => {
    for (const h of engines) await h.close();
    engines = [];
    await db.drop();
  });

  /** Sets the schedule's next fire to `at` (as if it had last fired just before). */
  const rewind = (at: string) =>
    db.pool.query(
      `UPDATE gen_durable_schedules SET next_fire_at = $1 WHERE name = 'every-second'`,
      [at],
    );
  const fired = async () =>
    (
      await db.pool.query<{ key: string }>(
        `SELECT correlation_key AS key FROM gen_durable WHERE fsm = 'ticked' ORDER BY correlation_key`,
      )
    ).rows.map((r) => r.key);

  /**
   * Resolves once `n` fires wait on a lock: the first behind the holder's transaction, the
   * others queued behind the first on the row's tuple lock (so pg_blocking_pids names the first
   * waiter for them, not the holder).
   */
  const waitingFires = (n: number) =>
    eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'
            AND query LIKE '%UPDATE%gen_durable_schedules%'`,
      );
      return rows[0]!.n === n;
    });

  beforeEach(async () => {
    await db.pool.query(`DELETE FROM gen_durable`);
  });

  it('three engines booting with the same declaration store one schedule', async () => {
    const { rows } = await db.pool.query(
      `SELECT name, fsm, cron, declared FROM gen_durable_schedules`,
    );
    expect(rows).toEqual([
      { name: 'every-second', fsm: 'ticked', cron: '* * * * * *', declared: true },
    ]);
  });

  it('three engines ticking the same instant together insert each occurrence once', async () => {
    await rewind('2026-05-01T12:00:00Z');
    const at = new Date('2026-05-01T12:00:02.200Z');
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(engines.map((h) => h.engine.runtime.firer.tick(at)));
      expect(results.reduce((n, r) => n + r.fired, 0)).toBe(round === 0 ? 3 : 0);
      expect(results.filter((r) => r.advanced > 0).length).toBe(round === 0 ? 1 : 0);
    }
    expect(await fired()).toEqual([
      'cron:every-second:2026-05-01T12:00:00.000Z',
      'cron:every-second:2026-05-01T12:00:01.000Z',
      'cron:every-second:2026-05-01T12:00:02.000Z',
    ]);
    const { rows } = await db.pool.query(
      `SELECT next_fire_at, last_fire_at FROM gen_durable_schedules WHERE name = 'every-second'`,
    );
    expect(rows[0]).toEqual({
      next_fire_at: new Date('2026-05-01T12:00:03.000Z'),
      last_fire_at: new Date('2026-05-01T12:00:02.000Z'),
    });
  });

  it('ticks queued behind a session holding the schedule row fire once, after it lets go', async () => {
    await rewind('2026-05-01T13:00:00Z');
    const at = new Date('2026-05-01T13:00:00.100Z');
    const holder = await openRawSession(db);
    try {
      await holder.exec('BEGIN');
      await holder.exec(
        `SELECT 1 FROM gen_durable_schedules WHERE name = 'every-second' FOR UPDATE`,
      );
      const ticks = Promise.all(engines.map((h) => h.engine.runtime.firer.tick(at)));
      // All three fires wait on the row lock inside FIRE_SCHEDULE's compare-and-set.
      await waitingFires(engines.length);
      expect(await waitUntilBlockedBy(db, holder.pid)).toHaveLength(1);
      await holder.exec('COMMIT');
      const results = await ticks;
      expect(results.map((r) => r.fired).sort()).toEqual([0, 0, 1]);
    } finally {
      await holder.close();
    }
    expect(await fired()).toEqual(['cron:every-second:2026-05-01T13:00:00.000Z']);
  });

  it('the holder advancing the schedule first (another node) leaves the queued ticks nothing', async () => {
    await rewind('2026-05-01T14:00:00Z');
    const at = new Date('2026-05-01T14:00:00.100Z');
    const holder = await openRawSession(db);
    try {
      await holder.exec('BEGIN');
      await holder.exec(
        `UPDATE gen_durable_schedules SET next_fire_at = '2026-05-01T14:00:01Z' WHERE name = 'every-second'`,
      );
      const ticks = Promise.all(engines.map((h) => h.engine.runtime.firer.tick(at)));
      await waitingFires(engines.length);
      expect(await waitUntilBlockedBy(db, holder.pid)).toHaveLength(1);
      await holder.exec('COMMIT');
      const results = await ticks;
      expect(results.map((r) => r.fired)).toEqual([0, 0, 0]);
    } finally {
      await holder.close();
    }
    expect(await fired()).toEqual([]);
  });

  it('an occurrence already fired is not fired again when next_fire_at is set back (the key guard)', async () => {
    await rewind('2026-05-01T15:00:00Z');
    const at = new Date('2026-05-01T15:00:01.500Z');
    const [a, b] = engines;
    expect((await a!.engine.runtime.firer.tick(at)).fired).toBe(2);
    // A divergent definition recomputed the same occurrences: the compare-and-set matches again,
    // the keys cron:every-second:<instant> (held until GC) do not let them in twice.
    await rewind('2026-05-01T15:00:00Z');
    b!.clear();
    const again = await b!.engine.runtime.firer.tick(at);
    expect(again).toMatchObject({ fired: 0, advanced: 1 });
    expect(b!.eventsOf('cron:skipped').map((e) => [e.measurements, e.metadata])).toEqual([
      [{ count: 2 }, { name: 'every-second', reason: 'duplicate' }],
    ]);
    expect(await fired()).toEqual([
      'cron:every-second:2026-05-01T15:00:00.000Z',
      'cron:every-second:2026-05-01T15:00:01.000Z',
    ]);
  });

  it('a fire is one statement after the tick read (docs/design.md §25.1)', async () => {
    await rewind('2026-05-01T16:00:00Z');
    const [a] = engines;
    a!.clear();
    await a!.engine.runtime.firer.tick(new Date('2026-05-01T16:00:00.300Z'));
    expect(a!.statements).toEqual(['due_schedules', 'fire_schedule']);
    a!.clear();
    // Nothing due: the read alone.
    await a!.engine.runtime.firer.tick(new Date('2026-05-01T16:00:00.600Z'));
    expect(a!.statements).toEqual(['due_schedules']);
  });
});
