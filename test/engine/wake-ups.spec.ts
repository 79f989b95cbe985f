import { done, DurableFsm, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.4: the node that commits a row due later (a retry backoff, a scheduleIn)
// arms a local wake-up for its due time, so the row does not wait for the idle poll.

/** A poll this long never fires during a test: what runs later, a wake-up (or poke) found. */
const NO_POLL = { pollInterval: 60_000, maxPollInterval: 60_000 };

const attempts = new Map<string, number[]>();

@DurableFsm({ name: 'backs-off', queue: 'wake', maxAttempts: 3 })
class BacksOffJob {
  perform(_args: unknown, ctx: StepContext) {
    attempts.set(ctx.id, [...(attempts.get(ctx.id) ?? []), ctx.attempt]);
    if (ctx.attempt === 0) throw new Error('first try fails');
    return done({ attempt: ctx.attempt });
  }
  backoff() {
    return 200;
  }
}

describe('local wake-ups (docs/design.md §27.4)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('with wake-ups (poke local)', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [BacksOffJob], {
        name: 'Woken',
        queues: { wake: 2 },
        ...NO_POLL,
        reaper: false,
        gc: false,
      });
      await h.waitFor('scheduler:saturation'); // the boot poll ran; the next one is 60 s away
    });
    afterAll(async () => {
      await h.close();
    });

    it('a 200 ms retry backoff runs once due, without a poll', async () => {
      const id = await h.engine.insert(BacksOffJob);
      // The run after the backoff comes from the wake-up: no poll runs within a minute.
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
        kind: 'done',
        result: { attempt: 1 },
      });
      expect(attempts.get(id)).toEqual([0, 1]);
    });

    it('an insert with scheduleIn runs once due, without a poll', async () => {
      const id = await h.engine.insert(BacksOffJob, { scheduleIn: 300 });
      expect(h.engine.runtime.wakeUps.pending('wake')).toBeGreaterThan(0);
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toMatchObject({
        kind: 'done',
      });
      expect(attempts.get(id)).toEqual([0, 1]);
      expect(h.engine.runtime.wakeUps.pending('wake')).toBe(0);
    });

    it('a delay beyond maxPollInterval × 10 is left to the poll', () => {
      expect(h.engine.runtime.wakeUps.arm('wake', 600_001)).toBe(false);
      expect(h.engine.runtime.wakeUps.arm('wake', 0)).toBe(false);
      expect(h.engine.runtime.wakeUps.pending('wake')).toBe(0);
    });
  });

  describe("without wake-ups (poke 'none': poll only)", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [BacksOffJob], {
        name: 'Unwoken',
        queues: { wake: 2 },
        ...NO_POLL,
        poke: 'none',
        reaper: false,
        gc: false,
      });
      await h.waitFor('scheduler:saturation');
    });
    afterAll(async () => {
      await h.close();
    });

    it('the same backoff is still waiting well after it was due: only the poll would run it', async () => {
      const id = await h.engine.insert(BacksOffJob);
      h.engine.runtime.schedulers.get('wake')?.poke(); // 'none' pokes nothing: claim it by hand
      await eventually(async () => (await rowOf(db, id))['attempt'] === 1, 20_000);
      // Due 200 ms after the commit; wait on the database clock until it is 1 s overdue.
      await eventually(async () => {
        const { rows } = await db.pool.query<{ overdue: boolean }>(
          `SELECT eligible_at < now() - interval '1 second' AS overdue FROM gen_durable WHERE id = $1`,
          [id],
        );
        return rows[0]?.overdue === true;
      }, 20_000);
      expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', attempt: 1 });
      expect(attempts.get(id)).toEqual([0]);
    });
  });
});
