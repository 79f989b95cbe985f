import { done, DurableFsm, retry, scheduleChildren, Step, type StepContext } from '../../lib';
import {
  bootEngine,
  claimRows,
  eventually,
  execute,
  Gates,
  type Harness,
  rowOf,
  sleep,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import { MARK_STEP_STARTED } from '../../lib/sql/lease.sql';

// docs/design.md §17, §25.7, §26.2, §26.5: leases, heartbeats, reaper (+ poison pill), startup reclaim.
// Timings are the FAST ones (lease 2 s, heartbeat 0.5 s, reaper 0.25 s) unless stated.

const executions = new Map<string, number>();
const count = (id: string) => executions.set(id, (executions.get(id) ?? 0) + 1);
const onErrorCalls: string[] = [];
const gates = new Gates();

@DurableFsm({ name: 'lease-manual', queue: 'lease-manual' })
class ManualFsm {
  @Step() start() {
    return done({});
  }
  onError(_err: unknown, ctx: StepContext) {
    onErrorCalls.push(ctx.id);
    return retry(ctx.state, 0);
  }
}

@DurableFsm({ name: 'sleeper', queue: 'long' })
class SleeperFsm {
  @Step() async start(ctx: StepContext<{ ms: number }>) {
    count(ctx.id);
    await sleep(ctx.state.ms);
    return done({ attempt: ctx.attempt });
  }
}

@DurableFsm({ name: 'reclaimable', queue: 'reclaim' })
class ReclaimableFsm {
  @Step() start(ctx: StepContext) {
    count(ctx.id);
    return done({ attempt: ctx.attempt });
  }
}

@DurableFsm({ name: 'pill-parent', queue: 'pill-parent' })
class PillParentFsm {
  @Step() start() {
    return scheduleChildren('after', [{ fsm: 'pill', queue: 'pill-nowhere' }], {});
  }
  @Step() after(ctx: StepContext) {
    return done({
      children: ctx.children.map((c) => ({ status: c.status, lastError: c.lastError })),
    });
  }
}

@DurableFsm({ name: 'pill', queue: 'pill-nowhere' })
class PillFsm {
  @Step() start() {
    return done({ survived: true });
  }
}

@DurableFsm({ name: 'drained', queue: 'drain' })
class DrainedFsm {
  @Step() async start(ctx: StepContext<{ key: string }>) {
    await gates.wait(ctx.state.key);
    return done({ key: ctx.state.key });
  }
}

/** Claimed rows whose steps start, as the scheduler records it for rows that lost a worker (F-R11). */
async function started(h: Harness, rows: ClaimedRow[]): Promise<ClaimedRow[]> {
  for (const row of rows) {
    if (row.reaps > 0) {
      await MARK_STEP_STARTED.run(h.engine.runtime.sql, { worker: row.worker, row });
    }
  }
  return rows;
}

/** last_error of the pill below: two counted losses, then one during its solo run (§26.5). */
const POISONED =
  'poison pill: step start lost its worker 3 times, the last while it ran alone (reaper.maxReaps)';

async function expireLease(db: TestDatabase, id: string): Promise<void> {
  await db.pool.query(
    `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
    [id],
  );
}

describe('leases (docs/design.md §17, §25.7)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    gates.openAll();
    await db.drop();
  });

  describe('reaper', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [ManualFsm, PillParentFsm, PillFsm], {
        queues: { 'pill-parent': 2 },
        reaper: { interval: 100, maxReaps: 2 },
        gc: false,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('returns an expired claim to runnable with attempt + 1, no onError, reaper:reaped', async () => {
      const id = await h.engine.insert(ManualFsm, { scheduleIn: 0 });
      const before = await rowOf(db, id);
      const [claimed] = await claimRows(h.engine, 'lease-manual', 1, 'dead-worker');
      expect(claimed?.id).toBe(id);
      // The claim's own lease (2 s) runs out; nobody heartbeats it.
      const reaped = await h.waitFor('reaper:reaped', undefined, 10_000);
      expect(reaped.measurements['count']).toBeGreaterThanOrEqual(1);
      const row = await rowOf(db, id);
      expect(row).toMatchObject({
        status: 'runnable',
        attempt: 1,
        reaps: 1,
        locked_by: null,
        lease_expires_at: null,
      });
      expect(row['eligible_at']).toEqual(before['eligible_at']);
      expect(onErrorCalls).toEqual([]);
    });

    it('poison pill: reaped reaper.maxReaps times ⇒ a suspect; lost again (its solo run) ⇒ failed naming step and count, inbox consumed, parent joined', async () => {
      const parentId = await h.engine.insert(PillParentFsm);
      const childId = await eventually(async () => {
        const { rows } = await db.pool.query<{ id: string }>(
          `SELECT id FROM gen_durable WHERE parent_id = $1`,
          [parentId],
        );
        return rows[0]?.id;
      });
      await eventually(
        async () => (await h.engine.get({ id: parentId }))?.status === 'awaiting_children',
      );
      await h.engine.signal({ id: childId }, 'unrelated');
      h.clear();
      for (let reap = 1; reap <= 3; reap++) {
        // A second reap spreads the row up to one lease ahead (finding F-R2): due now.
        await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [childId]);
        const [claimed] = await started(
          h,
          await claimRows(h.engine, 'pill-nowhere', 1, `killed-worker-${reap}`),
        );
        expect(claimed).toMatchObject({ id: childId, suspect: reap === 3 });
        await expireLease(db, childId);
        await eventually(async () => (await rowOf(db, childId))['reaps'] === reap);
        if (reap === 2) {
          expect(await rowOf(db, childId)).toMatchObject({ status: 'runnable', suspect: true });
          const suspect = await h.waitFor('reaper:suspect', (e) => e.metadata['id'] === childId);
          expect(suspect.metadata).toMatchObject({ fsm: 'pill', step: 'start', reaps: 2 });
        }
      }
      const poisoned = await h.waitFor('reaper:poisoned', (e) => e.metadata['id'] === childId);
      expect(poisoned.metadata).toMatchObject({ fsm: 'pill', step: 'start', reaps: 3 });
      const child = await rowOf(db, childId);
      expect(child).toMatchObject({
        status: 'failed',
        attempt: 2,
        locked_by: null,
        last_error: POISONED,
      });
      const { rows: inbox } = await db.pool.query(
        `SELECT consumed_at FROM gen_durable_signals WHERE target_id = $1`,
        [childId],
      );
      expect(inbox[0].consumed_at).not.toBeNull();
      expect(await h.engine.await(parentId, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: {
          children: [
            {
              status: 'failed',
              lastError: POISONED,
            },
          ],
        },
      });
    });

    it('a poison pill commits with its parent join or not at all', async () => {
      // The join of the poisoned child fails once (PostgreSQL refuses the parent's decrement):
      // the child must not be left failed with its parent still waiting for it.
      await db.pool.query(`CREATE TABLE refuse_join (active boolean NOT NULL)`);
      await db.pool.query(`INSERT INTO refuse_join VALUES (true)`);
      await db.pool.query(`
        CREATE FUNCTION refuse_join() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.children_pending < OLD.children_pending AND (SELECT active FROM refuse_join) THEN
            RAISE EXCEPTION 'join refused';
          END IF;
          RETURN NEW;
        END $$`);
      await db.pool.query(
        `CREATE TRIGGER refuse_join BEFORE UPDATE ON gen_durable FOR EACH ROW EXECUTE FUNCTION refuse_join()`,
      );
      try {
        const parentId = await h.engine.insert(PillParentFsm);
        const childId = await eventually(async () => {
          const { rows } = await db.pool.query<{ id: string }>(
            `SELECT id FROM gen_durable WHERE parent_id = $1`,
            [parentId],
          );
          return rows[0]?.id;
        });
        await eventually(
          async () => (await h.engine.get({ id: parentId }))?.status === 'awaiting_children',
        );
        // A suspect: its next counted loss (as during its solo run) fails it.
        await db.pool.query(`UPDATE gen_durable SET reaps = 2, suspect = true WHERE id = $1`, [
          childId,
        ]);
        await started(h, await claimRows(h.engine, 'pill-nowhere', 1, 'killed-again'));
        await expireLease(db, childId);
        // Sweeps fail while the join is refused: the child stays as it was, expired.
        const swept = await h.engine.runtime.reaper!.sweep();
        expect(swept).toEqual({ reaped: 0, poisoned: 0, timeouts: 0, deadlines: 0 });
        expect(await rowOf(db, childId)).toMatchObject({
          status: 'executing',
          reaps: 2,
          suspect: true,
          last_error: null,
        });
        expect(await rowOf(db, parentId)).toMatchObject({
          status: 'awaiting_children',
          children_pending: 1,
        });
        // Once the join goes through, the pill fails and the parent runs on.
        await db.pool.query(`UPDATE refuse_join SET active = false`);
        await eventually(async () => (await rowOf(db, childId))['status'] === 'failed');
        expect((await h.engine.await(parentId, { until: 'terminal', timeout: 10_000 })).kind).toBe(
          'done',
        );
      } finally {
        await db.pool.query(`DROP TRIGGER refuse_join ON gen_durable`);
      }
    });

    it('a committed outcome resets the reap count and the suspect flag', async () => {
      const id = await h.engine.insert(PillFsm);
      await started(h, await claimRows(h.engine, 'pill-nowhere', 1, 'killed-once'));
      await expireLease(db, id);
      await eventually(async () => (await rowOf(db, id))['reaps'] === 1);
      await db.pool.query(`UPDATE gen_durable SET suspect = true WHERE id = $1`, [id]);
      const [again] = await claimRows(h.engine, 'pill-nowhere', 1, 'survivor');
      expect(again?.suspect).toBe(true);
      expect(await execute(h.engine, again!)).toBe('committed');
      expect(await rowOf(db, id)).toMatchObject({
        status: 'done',
        reaps: 0,
        suspect: false,
        attempt: 1,
      });
    });
  });

  describe('heartbeats', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [SleeperFsm], {
        queues: { long: 1 },
        prefetch: 3,
        reaper: { interval: 100 },
        gc: false,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('keep a step longer than the lease, and the rows buffered behind it, alive', async () => {
      // One step of 2.5 × leaseTtl, then three prefetched rows that wait in the buffer for
      // up to 2.5 s + 3 × 0.6 s — all longer than the 2 s lease.
      const long = await h.engine.insert(SleeperFsm, { state: { ms: 5000 } });
      const queued = await h.engine.insertAll(
        SleeperFsm,
        [1, 2, 3].map(() => ({ state: { ms: 600 }, scheduleIn: 0 })),
      );
      await eventually(async () => (await rowOf(db, long))['status'] === 'executing');
      const firstLease = (await rowOf(db, long))['lease_expires_at'] as Date;
      await eventually(
        async () => ((await rowOf(db, long))['lease_expires_at'] as Date) > firstLease,
        5000,
      );
      const all = [long, ...queued];
      for (const id of all) {
        expect(await h.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
          kind: 'done',
          result: { attempt: 0 },
        });
      }
      expect(h.eventsOf('reaper:reaped')).toEqual([]);
      expect(h.eventsOf('outcome:stale')).toEqual([]);
      expect(all.map((id) => executions.get(id))).toEqual([1, 1, 1, 1]);
    }, 30_000);
  });

  describe('startup reclaim (docs/design.md §17.3, §26.2)', () => {
    const prefix = 'GenDurable:reclaim@reclaim-node-';
    const insertClaim = async (lockedBy: string, leaseMs: number, queue = 'reclaim') => {
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, lease_expires_at, claim_seq)
         VALUES ('reclaimable', 'start', $1, 'executing', $2, now() + make_interval(secs => $3::float8 / 1000), 1)
         RETURNING id`,
        [queue, lockedBy, leaseMs],
      );
      return rows[0]!.id;
    };
    const bootReclaimer = () =>
      bootEngine(db, [ReclaimableFsm], {
        queues: { reclaim: 2 },
        nodeId: 'reclaim-node',
        reaper: false,
        gc: false,
      });
    const untouched = async (pairs: readonly (readonly [string, string])[]) => {
      for (const [id, lockedBy] of pairs) {
        expect(await rowOf(db, id)).toMatchObject({ status: 'executing', locked_by: lockedBy });
        expect(executions.get(id)).toBeUndefined();
      }
    };
    const ranOnce = async (h: Harness, ids: readonly string[]) => {
      // Reclaimed rows run again with no attempt bump.
      for (const id of ids) {
        expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
          kind: 'done',
          result: { attempt: 0 },
        });
      }
    };

    it("with the node's liveness lock, frees every claim of this queue under this node's prefix, whatever its lease", async () => {
      const dead = await insertClaim(`${prefix}dead0001`, 100);
      const expired = await insertClaim(`${prefix}dead0002`, -5000);
      // A lease far from its end: its process is gone all the same (the lock proves it).
      const fresh = await insertClaim(`${prefix}dead0003`, 60_000);
      const otherNode = await insertClaim('GenDurable:reclaim@reclaim-node2-dead0004', 100);
      const otherQueue = await insertClaim(
        'GenDurable:elsewhere@reclaim-node-dead0005',
        100,
        'elsewhere',
      );
      const h = await bootReclaimer();
      try {
        const reclaimed = await h.waitFor('scheduler:reclaimed');
        expect(reclaimed.measurements).toEqual({ count: 3 });
        expect(reclaimed.metadata).toEqual({ queue: 'reclaim' });
        await ranOnce(h, [dead, expired, fresh]);
        await untouched([
          [otherNode, 'GenDurable:reclaim@reclaim-node2-dead0004'],
          [otherQueue, 'GenDurable:elsewhere@reclaim-node-dead0005'],
        ]);
      } finally {
        await h.close();
      }
    });

    it('while another session holds the lock, frees only stale claims (lease margin); the rest once the lock is free', async () => {
      // Another live process with this nodeId, as PostgreSQL sees it: a session holding the lock.
      const holder = await db.pool.connect();
      const key = 'public:GenDurable:reclaim-node';
      await holder.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [key]);
      let locked = true;
      // lease margin = max(leaseTtl − 2 × heartbeat, 0) = 1 000 ms with FAST timings.
      const dead = await insertClaim(`${prefix}dead0011`, 100);
      const live = await insertClaim(`${prefix}live0011`, 60_000);
      const h = await bootReclaimer();
      try {
        const first = await h.waitFor('scheduler:reclaimed');
        expect(first.measurements).toEqual({ count: 1 });
        expect(h.eventsOf('boot:warning').map((e) => e.metadata['warning'])).toContainEqual(
          'another live process holds nodeId reclaim-node: startup reclaim falls back to the lease',
        );
        await ranOnce(h, [dead]);
        await untouched([[live, `${prefix}live0011`]]);
        // The other process goes away: the engine takes the lock and the rest of the claims.
        h.clear();
        await holder.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [key]);
        locked = false;
        const later = await h.waitFor('scheduler:reclaimed', () => true, 20_000);
        expect(later.measurements).toEqual({ count: 1 });
        await ranOnce(h, [live]);
      } finally {
        if (locked) await holder.query(`SELECT pg_advisory_unlock_all()`);
        holder.release();
        await h.close();
      }
    });
  });

  describe('graceful drain (docs/design.md §17.4)', () => {
    it('releases buffered rows at once and lets the in-flight step finish and commit', async () => {
      const h = await bootEngine(db, [DrainedFsm], {
        queues: { drain: 1 },
        prefetch: 3,
        drainTimeout: 20_000,
        reaper: false,
        gc: false,
      });
      let closed = false;
      try {
        const keys = ['d1', 'd2', 'd3', 'd4'];
        const ids = await h.engine.insertAll(
          DrainedFsm,
          keys.map((key) => ({ state: { key } })),
        );
        await eventually(async () => {
          const { rows } = await db.pool.query(
            `SELECT count(*)::int AS n FROM gen_durable WHERE queue = 'drain' AND status = 'executing'`,
          );
          return rows[0].n === 4;
        });
        const running = await Promise.race(keys.map((k) => gates.reached(k).then(() => k)));
        const closing = h.close().then(() => (closed = true));
        const drain = await h.waitFor('scheduler:drain');
        expect(drain.measurements).toEqual({ released: 3, inFlight: 1 });
        const { rows } = await db.pool.query(
          `SELECT state->>'key' AS key, status, attempt, locked_by FROM gen_durable WHERE id = ANY($1::bigint[]) ORDER BY id`,
          [ids],
        );
        expect(rows.filter((r) => r.key !== running)).toEqual(
          keys
            .filter((k) => k !== running)
            .map((key) => ({ key, status: 'runnable', attempt: 0, locked_by: null })),
        );
        expect(rows.find((r) => r.key === running)).toMatchObject({ status: 'executing' });
        await sleep(300);
        expect(closed).toBe(false); // the drain waits for the in-flight step
        gates.open(running);
        await closing;
        const { rows: finished } = await db.pool.query(
          `SELECT status, result FROM gen_durable WHERE state->>'key' = $1`,
          [running],
        );
        expect(finished).toEqual([{ status: 'done', result: { key: running } }]);
      } finally {
        gates.openAll();
        await h.close();
      }
    });
  });
});
