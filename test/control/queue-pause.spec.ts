import { done, DurableFsm, InvalidInputError, Step, type StepContext } from '../../lib';
import { GenDurableHealthIndicator, GenDurableHealthModule } from '../../lib/health';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, eventually, Gates, type Harness } from '../support/engine-harness';
import { openRawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.6: a fleet-wide queue pause, read by every scheduler at its next claim
// (or poll tick while it holds buffered rows). Two engines share one database: `worker` runs
// queue `pq`, `admin` runs no queue and pauses, resumes and inserts.

const gates = new Gates();

@DurableFsm({ name: 'pause-job', queue: 'pq' })
class PauseJobFsm {
  @Step() async start(ctx: StepContext<{ key?: string }>) {
    if (ctx.state.key !== undefined) await gates.wait(ctx.state.key);
    return done({});
  }
}

@DurableFsm({ name: 'pause-other', queue: 'other' })
class OtherFsm {
  @Step() start() {
    return done({});
  }
}

async function statuses(db: TestDatabase, ids: readonly string[]): Promise<string[]> {
  const { rows } = await db.pool.query<{ status: string }>(
    'SELECT status FROM gen_durable WHERE id = ANY($1::bigint[]) ORDER BY id',
    [ids],
  );
  return rows.map((r) => r.status);
}

/** Resolves after `n` more picks of `queue` on `h` (each one a claim statement). */
function picks(h: Harness, queue: string, n: number): Promise<unknown> {
  const of = (): number =>
    h.eventsOf('pick:stop').filter((e) => e.metadata['queue'] === queue).length;
  const seen = of();
  return eventually(async () => of() >= seen + n, 15_000);
}

describe('queue pause (docs/design.md §27.6)', () => {
  let db: TestDatabase;
  let admin: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    admin = await bootEngine(db, [PauseJobFsm, OtherFsm], {
      name: 'admin',
      queues: {},
      poke: 'none',
    });
  });
  afterAll(async () => {
    gates.openAll();
    await admin.close();
    await db.drop();
  });
  afterEach(async () => {
    await db.pool.query('DELETE FROM gen_durable_paused_queues');
  });

  describe('seen by another engine', () => {
    let worker: Harness;
    afterEach(async () => {
      gates.openAll();
      await worker?.close();
    });

    it('a pause stored by one engine stops the other engine claiming at its next poll; resume runs the rows', async () => {
      // No pokes: the worker learns only from its own poll, as a node without a cross-node poke.
      worker = await bootEngine(db, [PauseJobFsm, OtherFsm], { queues: { pq: 2 }, poke: 'none' });
      const paused = await admin.engine.pauseQueue('pq', { reason: 'incident 42' });
      expect(paused).toMatchObject({
        queue: 'pq',
        reason: 'incident 42',
        created: true,
        known: true,
      });
      expect(paused.pausedAt).toBeInstanceOf(Date);
      await worker.waitFor('scheduler:paused', (e) => e.metadata['queue'] === 'pq');
      expect(worker.engine.runtime.schedulers.get('pq')?.paused).toBe(true);

      const ids = await admin.engine.insertAll(PauseJobFsm, [{}, {}, {}]);
      await picks(worker, 'pq', 3);
      expect(await statuses(db, ids)).toEqual(['runnable', 'runnable', 'runnable']);

      expect(await admin.engine.resumeQueue('pq')).toEqual({
        queue: 'pq',
        wasPaused: true,
        known: true,
      });
      await worker.waitFor('scheduler:resumed', (e) => e.metadata['queue'] === 'pq');
      await eventually(async () => (await statuses(db, ids)).every((s) => s === 'done'));
    });

    it('a paused poll is still one statement (the claim answers the pause)', async () => {
      worker = await bootEngine(db, [PauseJobFsm, OtherFsm], {
        queues: { pq: 2 },
        poke: 'none',
        reaper: false,
        gc: false,
        pollInterval: 30,
        maxPollInterval: 30,
      });
      await admin.engine.pauseQueue('pq');
      await worker.waitFor('scheduler:paused');
      worker.clear();
      await picks(worker, 'pq', 4);
      const log = worker.statements.filter((s) => s !== 'claim_runnable');
      expect(log).toEqual([]);
      // Four picks ended; the first may have started (and been recorded) before clear().
      expect(worker.statements.length).toBeGreaterThanOrEqual(3);
    });

    it('releases the rows a saturated scheduler had buffered; its running step finishes; nothing else starts', async () => {
      worker = await bootEngine(db, [PauseJobFsm, OtherFsm], {
        queues: { pq: 1 },
        poke: 'local',
        prefetch: 3,
      });
      const ids = await worker.engine.insertAll(PauseJobFsm, [
        { state: { key: 'b1' } },
        { state: { key: 'b2' } },
        { state: { key: 'b3' } },
        { state: { key: 'b4' } },
      ]);
      const scheduler = worker.engine.runtime.schedulers.get('pq')!;
      await eventually(async () => scheduler.inFlightCount === 1 && scheduler.bufferedCount === 3);
      const [running] = await db.pool
        .query<{ id: string }>(
          `SELECT id::text FROM gen_durable WHERE id = ANY($1::bigint[]) AND status = 'executing' ORDER BY id`,
          [ids],
        )
        .then((r) => r.rows);
      expect(running).toBeDefined();

      await admin.engine.pauseQueue('pq');
      const event = await worker.waitFor('scheduler:paused');
      expect(event.measurements).toEqual({ released: 3 });
      expect(scheduler.bufferedCount).toBe(0);
      const others = ids.filter((id) => id !== running!.id);
      expect(await statuses(db, others)).toEqual(['runnable', 'runnable', 'runnable']);

      // The running step finishes and commits; no released row starts meanwhile.
      gates.open('b1');
      gates.open('b2');
      gates.open('b3');
      gates.open('b4');
      await eventually(async () => (await statuses(db, [running!.id]))[0] === 'done');
      await picks(worker, 'pq', 2);
      expect(await statuses(db, others)).toEqual(['runnable', 'runnable', 'runnable']);

      await admin.engine.resumeQueue('pq');
      await eventually(async () => (await statuses(db, ids)).every((s) => s === 'done'));
    });
  });

  describe('pause vs a pick in flight (real connections)', () => {
    let worker: Harness;
    afterEach(async () => {
      gates.openAll();
      await worker?.close();
    });

    it('claim first: a claim whose snapshot predates the pause keeps its rows (they run); the next claim takes nothing', async () => {
      worker = await bootEngine(db, [PauseJobFsm, OtherFsm], { queues: { pq: 1 }, poke: 'local' });
      // A second session holds key k executing (uncommitted) on a row of another queue: the
      // worker's claim of a k row waits on the K = 1 arbiter index for that transaction, with
      // its snapshot already taken.
      const [holder] = await admin.engine.insertAll(OtherFsm, [
        { concurrencyKey: 'k', queue: 'idle' },
      ]);
      const session = await openRawSession(db);
      try {
        await session.exec('BEGIN');
        await session.exec(
          `UPDATE gen_durable SET status = 'executing', locked_by = 'holder',
                  lease_expires_at = now() + interval '1 minute' WHERE id = $1`,
          [holder],
        );
        const inFlight = await worker.engine.insert(PauseJobFsm, { concurrencyKey: 'k' });
        await waitUntilBlockedBy(db, session.pid);

        await admin.engine.pauseQueue('pq');
        await session.exec('ROLLBACK');
        // The claim completes with its row: it began before the pause committed.
        await eventually(async () => (await statuses(db, [inFlight]))[0] === 'done');
      } finally {
        await session.close();
      }
      // The scheduler learns the pause from its next claim; later rows wait.
      await worker.waitFor('scheduler:paused');
      const later = await worker.engine.insert(PauseJobFsm, {});
      await picks(worker, 'pq', 2);
      expect(await statuses(db, [later])).toEqual(['runnable']);
      await admin.engine.resumeQueue('pq');
      await eventually(async () => (await statuses(db, [later]))[0] === 'done');
    });

    it('pause in flight: a claim during an uncommitted pause claims as usual; once the pause commits, the next claim takes nothing', async () => {
      worker = await bootEngine(db, [PauseJobFsm, OtherFsm], { queues: { pq: 1 }, poke: 'local' });
      // The pause transaction is open when the row is inserted and poked: the claim does not
      // see it (uncommitted) and runs the row; after COMMIT, the next claim takes nothing.
      const session = await openRawSession(db);
      let later: string;
      try {
        await session.exec('BEGIN');
        await session.exec(`INSERT INTO gen_durable_paused_queues (queue) VALUES ('pq')`);
        const early = await worker.engine.insert(PauseJobFsm, {});
        await eventually(async () => (await statuses(db, [early]))[0] === 'done');
        await session.exec('COMMIT');
        later = await worker.engine.insert(PauseJobFsm, {});
        await worker.waitFor('scheduler:paused');
      } finally {
        await session.close();
      }
      await picks(worker, 'pq', 2);
      expect(await statuses(db, [later])).toEqual(['runnable']);
      await admin.engine.resumeQueue('pq');
      await eventually(async () => (await statuses(db, [later]))[0] === 'done');
    });
  });

  describe('status, health and the testing drain', () => {
    it('queueStatus lists known, paused and backlogged queues with capped counts', async () => {
      await admin.engine.insertAll(OtherFsm, [{}, {}, {}], {});
      await admin.engine.insertAll(OtherFsm, [{ queue: 'backlog-only' }]);
      await admin.engine.pauseQueue('nobody-runs-this');
      const all = await admin.engine.queueStatus(undefined, { cap: 2 });
      const byQueue = new Map(all.map((q) => [q.queue, q]));
      expect(byQueue.get('other')).toMatchObject({
        paused: false,
        served: false,
        runnable: { count: 2, capped: true },
        due: { count: 2, capped: true },
        executing: { count: 0, capped: false },
      });
      expect(byQueue.get('backlog-only')).toMatchObject({ runnable: { count: 1, capped: false } });
      expect(byQueue.get('nobody-runs-this')).toMatchObject({ paused: true, reason: null });
      expect(byQueue.has('pq')).toBe(true);
      const one = await admin.engine.queueStatus('nobody-runs-this');
      expect(one.map((q) => q.queue)).toEqual(['nobody-runs-this']);
      await db.pool.query(`DELETE FROM gen_durable WHERE queue IN ('other', 'backlog-only')`);
    });

    it('pausing a queue no node knows is allowed and reported (known: false); pause and resume are idempotent', async () => {
      const first = await admin.engine.pauseQueue('typo-queue', { reason: 'first' });
      expect(first).toMatchObject({ created: true, known: false, reason: 'first' });
      const again = await admin.engine.pauseQueue('typo-queue');
      expect(again).toMatchObject({ created: false, reason: 'first' });
      expect(again.pausedAt).toEqual(first.pausedAt);
      const renamed = await admin.engine.pauseQueue('typo-queue', { reason: 'second' });
      expect(renamed).toMatchObject({ created: false, reason: 'second' });
      expect(admin.eventsOf('queue:paused').map((e) => e.metadata['created'])).toEqual(
        expect.arrayContaining([true, false]),
      );
      expect(await admin.engine.resumeQueue('typo-queue')).toEqual({
        queue: 'typo-queue',
        wasPaused: true,
        known: false,
      });
      expect(await admin.engine.resumeQueue('typo-queue')).toMatchObject({ wasPaused: false });
    });

    it('runnableBacklog reports a paused queue as up with paused: true, however old its head', async () => {
      const h = await bootEngine(
        db,
        [PauseJobFsm, OtherFsm],
        { queues: {}, poke: 'none' },
        {
          imports: [GenDurableHealthModule.forFeature()],
        },
      );
      try {
        const [id] = await h.engine.insertAll(PauseJobFsm, [{}]);
        await db.pool.query(
          `UPDATE gen_durable SET eligible_at = now() - interval '1 hour' WHERE id = $1`,
          [id],
        );
        const indicator = h.app.get(GenDurableHealthIndicator);
        const down = await indicator.runnableBacklog('queues', { queues: ['pq'], maxAgeMs: 1000 });
        expect(down['queues']?.status).toBe('down');
        await h.engine.pauseQueue('pq');
        const up = await indicator.runnableBacklog('queues', { queues: ['pq'], maxAgeMs: 1000 });
        expect(up['queues']).toMatchObject({
          status: 'up',
          queues: { pq: { paused: true, depth: 1 } },
        });
        await db.pool.query('DELETE FROM gen_durable WHERE id = $1', [id]);
      } finally {
        await h.close();
      }
    });

    it('the testing drain runs nothing of a paused queue', async () => {
      const testing = GenDurableTesting.forEngine(admin.engine);
      const [id] = await admin.engine.insertAll(PauseJobFsm, [{}]);
      await admin.engine.pauseQueue('pq');
      expect((await testing.drain({ queue: 'pq' })).steps).toBe(0);
      expect(await statuses(db, [id!])).toEqual(['runnable']);
      await admin.engine.resumeQueue('pq');
      expect((await testing.drain({ queue: 'pq' })).steps).toBe(1);
      expect(await statuses(db, [id!])).toEqual(['done']);
    });
  });

  describe('bad input: a typed error naming the problem, nothing stored', () => {
    it.each([
      ['an empty queue name', () => admin.engine.pauseQueue(''), 'pauseQueue.queue'],
      [
        'a queue name that is not a string',
        () => admin.engine.pauseQueue(42 as unknown as string),
        'pauseQueue.queue',
      ],
      [
        'an empty reason',
        () => admin.engine.pauseQueue('pq', { reason: '' }),
        'pauseQueue.options.reason',
      ],
      [
        'an unknown option',
        () => admin.engine.pauseQueue('pq', { reson: 'x' } as unknown as { reason: string }),
        'pauseQueue.options',
      ],
      ['resume of an empty name', () => admin.engine.resumeQueue(''), 'resumeQueue.queue'],
      [
        'a status cap of 0',
        () => admin.engine.queueStatus(undefined, { cap: 0 }),
        'queueStatus.options.cap',
      ],
    ])('%s', async (_label, call, path) => {
      const error = await call().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).path).toBe(path);
      const { rows } = await db.pool.query('SELECT queue FROM gen_durable_paused_queues');
      expect(rows).toEqual([]);
    });
  });
});
