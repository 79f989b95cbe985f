import { ConfigurationError, done, DurableFsm, Step } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { insertRowInStatus } from '../support/rows';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §18 step 1, §25.8: GC deletes terminal rows past retention in batches (a full batch
// sweeps again at once), never a live row, never a child of a live parent; the inbox goes
// with its instance.

@DurableFsm({ name: 'collected', queue: 'gc-none' })
class CollectedFsm {
  @Step() start() {
    return done({});
  }
}

const DAY = 86_400_000;

/** Keeps its done rows ten days and its cancelled ones not at all. */
@DurableFsm({ name: 'kept-long', queue: 'gc-none', retention: { done: 10 * DAY, cancelled: 0 } })
class KeptLongFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'bad-retention', queue: 'gc-none', retention: { failed: -1 } })
class BadRetentionFsm {
  @Step() start() {
    return done({});
  }
}

describe('GC of terminal rows (docs/design.md §18)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  /** Inserts a row straight into a status, `ageMs` old by updated_at. */
  const row = (status: string, ageMs: number, parentId: string | null = null, fsm = 'collected') =>
    insertRowInStatus(db.pool, { status, ageMs, parentId, fsm, queue: 'gc-none' });

  const existing = async (ids: string[]) =>
    (
      await db.pool.query<{ id: string }>(
        `SELECT id FROM gen_durable WHERE id = ANY($1::bigint[]) ORDER BY id`,
        [ids],
      )
    ).rows.map((r) => r.id);

  describe('one sweep', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [CollectedFsm], {
        queues: {},
        reaper: false,
        gc: {
          interval: 3_600_000,
          retention: 60_000,
          failedRetention: 60_000,
          cancelledRetention: 60_000,
          batch: 2,
          // The deletes alone: the archive's pass is test/engine/archive.spec.ts's.
          archive: 'off',
        },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('deletes old terminal rows in full batches until one comes back short, sparing the rest', async () => {
      const HOUR = 3_600_000;
      const oldDone = [
        await row('done', HOUR),
        await row('failed', HOUR),
        await row('done', HOUR),
        await row('failed', 2 * HOUR),
      ];
      const young = [await row('done', 1000), await row('failed', 0)];
      const oldLive = [await row('runnable', HOUR), await row('awaiting_signal', HOUR)];
      // A parent mid-join: its old terminal child is spared until the parent ends.
      const liveParent = await row('awaiting_children', HOUR);
      const sparedChild = await row('done', HOUR, liveParent);
      // A finished parent: it and its child both go.
      const deadParent = await row('done', HOUR);
      const orphanedChild = await row('failed', HOUR, deadParent);
      // An old terminal row with an inbox: the signals go with it.
      const withInbox = await row('done', HOUR);
      await db.pool.query(
        `INSERT INTO gen_durable_signals (target_id, name, consumed_at) VALUES ($1, 'a', now()), ($1, 'b', NULL)`,
        [withInbox],
      );
      const deleted = [...oldDone, deadParent, orphanedChild, withInbox];
      const kept = [...young, ...oldLive, liveParent, sparedChild];

      h.clear();
      expect(await h.engine.runtime.gc!.sweep()).toBe(7);
      expect(await existing(deleted)).toEqual([]);
      expect(await existing(kept)).toEqual([...kept].sort((a, b) => Number(a) - Number(b)));
      // 7 rows, batch 2: three full batches re-sweep at once, the fourth comes back short.
      expect(h.statements.filter((s) => s === 'gc_select_terminal')).toHaveLength(4);
      expect(h.statements.filter((s) => s === 'gc_delete')).toHaveLength(4);
      expect(h.eventsOf('gc:swept')).toEqual([
        expect.objectContaining({ measurements: { count: 7, heads: 0, buckets: 0, gates: 0 } }),
      ]);
      const { rows: signals } = await db.pool.query(
        `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1`,
        [withInbox],
      );
      expect(signals[0].n).toBe(0);

      // Once the parent ends, its old child goes on the next sweep.
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', children_pending = 0, updated_at = now() WHERE id = $1`,
        [liveParent],
      );
      h.clear();
      expect(await h.engine.runtime.gc!.sweep()).toBe(1);
      expect(await existing([sparedChild])).toEqual([]);
      expect(await existing([liveParent])).toEqual([liveParent]); // ended just now: retention runs from its end
      // Nothing left to do: no event.
      h.clear();
      expect(await h.engine.runtime.gc!.sweep()).toBe(0);
      expect(h.eventsOf('gc:swept')).toEqual([]);
    });
  });

  describe('retention per status and per FSM', () => {
    let h: Harness;
    beforeAll(async () => {
      await db.pool.query('DELETE FROM gen_durable');
      // Module defaults but for done: failed rows are kept 7 days, cancelled ones 1 day.
      h = await bootEngine(db, [CollectedFsm, KeptLongFsm], {
        queues: {},
        reaper: false,
        gc: { interval: 3_600_000, retention: 60_000, archive: 'off' },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('keeps a failed row past the done retention, until its own (7 days by default)', async () => {
      const HOUR = 3_600_000;
      const doneHour = await row('done', HOUR);
      const failedHour = await row('failed', HOUR);
      const failedDays = await row('failed', 3 * DAY);
      const failedWeek = await row('failed', 8 * DAY);
      const cancelledHour = await row('cancelled', HOUR);
      const cancelledDays = await row('cancelled', 2 * DAY);
      expect(await h.engine.runtime.gc!.sweep()).toBe(3);
      expect(await existing([doneHour, failedWeek, cancelledDays])).toEqual([]);
      expect(await existing([failedHour, failedDays, cancelledHour])).toEqual([
        failedHour,
        failedDays,
        cancelledHour,
      ]);
      await db.pool.query('DELETE FROM gen_durable');
    });

    it("uses an FSM's own retention where it declares one, the module's elsewhere", async () => {
      const keptDone = await row('done', 2 * DAY, null, 'kept-long');
      const keptDoneOld = await row('done', 11 * DAY, null, 'kept-long');
      const goneCancelled = await row('cancelled', 1000, null, 'kept-long');
      const keptFailed = await row('failed', 2 * DAY, null, 'kept-long'); // module's 7 days
      const otherDone = await row('done', 2 * DAY);
      expect(await h.engine.runtime.gc!.sweep()).toBe(3);
      expect(await existing([keptDoneOld, goneCancelled, otherDone])).toEqual([]);
      expect(await existing([keptDone, keptFailed])).toEqual([keptDone, keptFailed]);
      await db.pool.query('DELETE FROM gen_durable');
    });
  });

  it('refuses a bad @DurableFsm({ retention }) at boot, naming the field', async () => {
    await expect(bootEngine(db, [BadRetentionFsm], { queues: {}, reaper: false })).rejects.toThrow(
      ConfigurationError,
    );
    await expect(bootEngine(db, [BadRetentionFsm], { queues: {}, reaper: false })).rejects.toThrow(
      /bad-retention.*retention\.failed.*integer ≥ 0/,
    );
  });

  it('runs on its interval where gc is enabled, and not where it is false', async () => {
    const target = await row('done', 10_000);
    const off = await bootEngine(db, [CollectedFsm], { queues: {}, reaper: false, gc: false });
    try {
      expect(off.engine.runtime.gc).toBeUndefined();
    } finally {
      await off.close();
    }
    expect(await existing([target])).toEqual([target]);
    const on = await bootEngine(db, [CollectedFsm], {
      queues: {},
      reaper: false,
      gc: { interval: 100, retention: 5000 },
    });
    try {
      await eventually(async () => (await existing([target])).length === 0, 5000);
      // The emit follows the DELETE's reply, which may land after another session already sees the row gone.
      await eventually(async () => on.events.some((e) => e.event === 'gc:swept'), 2000);
    } finally {
      await on.close();
    }
  });
});
