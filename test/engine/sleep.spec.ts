import { Test } from '@nestjs/testing';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  getEngineToken,
  GenDurableModule,
  next,
  retry,
  sleep as sleepOutcome,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import {
  bootEngine,
  claimRows,
  eventually,
  execute,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.4: sleep(nextStep, state, { for } | { until }) is an outcome. The row is
// runnable at nextStep, due later on the database clock, attempt 0, holding nothing; the
// committing node arms a local wake-up for a short sleep; signals meanwhile stay in the inbox.

type NapState = { ms?: number; until?: string; failFirst?: number; to?: string };

/** Steps run per instance id, as `step@attempt`. */
const runs = new Map<string, string[]>();
function record(ctx: StepContext<unknown>): void {
  runs.set(ctx.id, [...(runs.get(ctx.id) ?? []), `${ctx.step}@${ctx.attempt}`]);
}

@DurableFsm({ name: 'napper', queue: 'naps' })
class NapperFsm {
  @Step() start(ctx: StepContext<NapState>) {
    record(ctx);
    if (ctx.attempt < (ctx.state.failFirst ?? 0)) return retry(ctx.state, 0);
    const to = ctx.state.to ?? 'woke';
    return ctx.state.until !== undefined
      ? sleepOutcome(to, ctx.state, { until: new Date(ctx.state.until) })
      : sleepOutcome(to, ctx.state, { for: ctx.state.ms ?? 0 });
  }
  @Step() woke(ctx: StepContext<NapState>) {
    record(ctx);
    return done({ attempt: ctx.attempt });
  }
}

/** Sleeps, then listens: a signal sent during the sleep waits in the inbox for the await. */
@DurableFsm({ name: 'listener', queue: 'naps' })
class ListenerFsm {
  @Step() start(ctx: StepContext) {
    return sleepOutcome('listen', ctx.state, { for: 3_600_000 });
  }
  @Step() listen(ctx: StepContext) {
    return awaitSignal('ping', 'heard', ctx.state);
  }
  @Step() heard(ctx: StepContext) {
    return done({ heard: ctx.awaited.map((s) => s.payload) });
  }
}

/** A next, for comparing flush statement counts. */
@DurableFsm({ name: 'stepper', queue: 'naps' })
class StepperFsm {
  @Step() start(ctx: StepContext) {
    return next('second', ctx.state);
  }
  @Step() second() {
    return done({});
  }
}

/** A sleep with a bad argument inside the step: a throw of the step (no onError: it stops). */
@DurableFsm({ name: 'bad-napper', queue: 'naps' })
class BadNapperFsm {
  @Step() start(ctx: StepContext<{ ms: number }>) {
    return sleepOutcome('start', ctx.state, { for: ctx.state.ms });
  }
}

/** A job that sleeps once (without spending an attempt), then finishes. */
@DurableFsm({ name: 'napping-job', queue: 'naps', maxAttempts: 1 })
class NappingJob {
  perform(args: { slept?: boolean }, ctx: StepContext) {
    record(ctx);
    return args.slept
      ? { slept: true, attempt: ctx.attempt }
      : sleepOutcome('perform', { slept: true }, { for: 0 });
  }
}

async function sleepRow(db: TestDatabase, id: string) {
  const { rows } = await db.pool.query<{
    status: string;
    step: string;
    attempt: number;
    locked_by: string | null;
    lease_expires_at: Date | null;
    concurrency_shard: number | null;
    eligible_at: Date;
    /** eligible_at − the commit's now(), ms (updated_at is that now()). */
    due_after_ms: number;
    due: boolean;
  }>(
    `SELECT status, step, attempt, locked_by, lease_expires_at, concurrency_shard, eligible_at,
            (EXTRACT(EPOCH FROM eligible_at - updated_at) * 1000)::float8 AS due_after_ms,
            eligible_at <= now() AS due
       FROM gen_durable WHERE id = $1`,
    [id],
  );
  return rows[0]!;
}

describe('durable sleep (docs/design.md §27.4)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('the committed row (steps run by hand on a queue no scheduler serves)', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [NapperFsm, ListenerFsm, StepperFsm, BadNapperFsm, NappingJob], {
        queues: {},
        reaper: false,
        gc: false,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('sleep { for }: runnable at the next step, attempt 0 (after two retries), due `for` ms after the commit, nothing held', async () => {
      const queue = 'by-hand-for';
      const id = await h.engine.insert(NapperFsm, {
        state: { ms: 1500, failFirst: 2 },
        queue,
        concurrencyKey: 'nap-key',
      });
      for (const attempt of [0, 1, 2]) {
        const [row] = await claimRows(h.engine, queue, 1, 'hand');
        expect(row).toMatchObject({ id, step: 'start', attempt });
        expect(await execute(h.engine, row!)).toBe('committed');
      }
      expect(runs.get(id)).toEqual(['start@0', 'start@1', 'start@2']);
      const slept = await sleepRow(db, id);
      expect(slept).toMatchObject({
        status: 'runnable',
        step: 'woke',
        attempt: 0,
        locked_by: null,
        lease_expires_at: null,
        concurrency_shard: null,
        due: false,
      });
      expect(slept.due_after_ms).toBeCloseTo(1500, 3);
      // The key is kept for the next step; holding it while runnable holds no slot.
      expect(await rowOf(db, id)).toMatchObject({ concurrency_key: 'nap-key' });
      // Not claimable before it is due.
      expect(await claimRows(h.engine, queue, 10, 'hand')).toEqual([]);
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
      const [woken] = await claimRows(h.engine, queue, 1, 'hand');
      expect(woken).toMatchObject({ id, step: 'woke', attempt: 0 });
      expect(await execute(h.engine, woken!)).toBe('committed');
      expect(await h.engine.get(id)).toMatchObject({ status: 'done', result: { attempt: 0 } });
      expect(runs.get(id)).toEqual(['start@0', 'start@1', 'start@2', 'woke@0']);
    });

    it('sleep { until }: due at that instant exactly', async () => {
      const queue = 'by-hand-until';
      const until = new Date(Date.now() + 7 * 24 * 3_600_000);
      until.setUTCMilliseconds(123);
      const id = await h.engine.insert(NapperFsm, {
        state: { until: until.toISOString() },
        queue,
      });
      const [row] = await claimRows(h.engine, queue, 1, 'hand');
      expect(await execute(h.engine, row!)).toBe('committed');
      const slept = await sleepRow(db, id);
      expect(slept).toMatchObject({ status: 'runnable', step: 'woke', attempt: 0, due: false });
      expect(slept.eligible_at.toISOString()).toBe(until.toISOString());
    });

    it('a sleep flush is 1 statement, as a flush of `next`s is (3 of each, autocommit)', async () => {
      const nexts = 'count-next';
      const sleeps = 'count-sleep';
      await h.engine.insertAll(
        StepperFsm,
        [0, 1, 2].map(() => ({ queue: nexts })),
      );
      await h.engine.insertAll(
        NapperFsm,
        [0, 1, 2].map((i) => ({ state: { ms: 60_000 + i }, queue: sleeps })),
      );
      const nextRows = await claimRows(h.engine, nexts, 3, 'counts');
      const sleepRows = await claimRows(h.engine, sleeps, 3, 'counts');
      expect(nextRows).toHaveLength(3);
      expect(sleepRows).toHaveLength(3);

      h.clear();
      expect(await Promise.all(nextRows.map((r) => execute(h.engine, r)))).toEqual([
        'committed',
        'committed',
        'committed',
      ]);
      const nextStatements = [...h.statements];
      h.clear();
      expect(await Promise.all(sleepRows.map((r) => execute(h.engine, r)))).toEqual([
        'committed',
        'committed',
        'committed',
      ]);
      expect(h.statements).toEqual(['flush_transitions']);
      expect(h.statements).toEqual(nextStatements);
      const ms = await Promise.all(
        sleepRows.map(async (r) => (await sleepRow(db, r.id)).due_after_ms),
      );
      expect(ms.map((m) => Math.round(m)).sort()).toEqual([60_000, 60_001, 60_002]);
    });

    it('a signal sent during the sleep waits in the inbox: it neither wakes the row nor is lost', async () => {
      const queue = 'by-hand-signal';
      const id = await h.engine.insert(ListenerFsm, { queue });
      const [row] = await claimRows(h.engine, queue, 1, 'hand');
      expect(await execute(h.engine, row!)).toBe('committed');
      const before = await sleepRow(db, id);
      await h.engine.signal({ id }, 'ping', { n: 1 });
      const after = await sleepRow(db, id);
      expect(after).toMatchObject({ status: 'runnable', step: 'listen', due: false });
      expect(after.eligible_at).toEqual(before.eligible_at);
      const { rows: inbox } = await db.pool.query(
        `SELECT name, consumed_at FROM gen_durable_signals WHERE target_id = $1`,
        [id],
      );
      expect(inbox).toEqual([{ name: 'ping', consumed_at: null }]);

      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
      const [listening] = await claimRows(h.engine, queue, 1, 'hand');
      expect(listening).toMatchObject({ step: 'listen' });
      expect(await execute(h.engine, listening!)).toBe('committed');
      // The park's lost-wakeup recheck found the stored signal: runnable at once.
      const [hearing] = await claimRows(h.engine, queue, 1, 'hand');
      expect(hearing).toMatchObject({ id, step: 'heard' });
      expect(await execute(h.engine, hearing!)).toBe('committed');
      expect(await h.engine.get(id)).toMatchObject({
        status: 'done',
        result: { heard: [{ n: 1 }] },
      });
    });

    it('a job sleeps without spending an attempt (maxAttempts: 1) and runs perform again', async () => {
      const queue = 'by-hand-job';
      const id = await h.engine.insert(NappingJob, { queue });
      const [first] = await claimRows(h.engine, queue, 1, 'hand');
      expect(await execute(h.engine, first!)).toBe('committed');
      expect(await sleepRow(db, id)).toMatchObject({
        status: 'runnable',
        step: 'perform',
        attempt: 0,
        due: true,
      });
      const [second] = await claimRows(h.engine, queue, 1, 'hand');
      expect(second).toMatchObject({ id, step: 'perform', attempt: 0, state: { slept: true } });
      expect(await execute(h.engine, second!)).toBe('committed');
      expect(await h.engine.get(id)).toMatchObject({
        status: 'done',
        result: { slept: true, attempt: 0 },
      });
      expect(runs.get(id)).toEqual(['perform@0', 'perform@0']);
    });

    it('an unknown next step is an UnknownStepError, a bad duration an InvalidOutcomeError: the step fails, nothing sleeps', async () => {
      const queue = 'by-hand-bad';
      const unknown = await h.engine.insert(NapperFsm, { state: { ms: 10, to: 'nowhere' }, queue });
      const negative = await h.engine.insert(BadNapperFsm, { state: { ms: -5 }, queue });
      const rows = await claimRows(h.engine, queue, 2, 'hand');
      expect(await Promise.all(rows.map((r) => execute(h.engine, r)))).toEqual([
        'committed',
        'committed',
      ]);
      const u = await h.engine.get(unknown);
      expect(u).toMatchObject({ status: 'failed', step: 'start' });
      expect(u?.lastError).toMatch(/^UnknownStepError: FSM "napper" has no step "nowhere"/);
      const n = await h.engine.get(negative);
      expect(n).toMatchObject({ status: 'failed', step: 'start' });
      expect(n?.lastError).toMatch(
        /^InvalidOutcomeError: sleep\(\): for must be an integer number of ms in 0 … \d+, got -5/,
      );
    });
  });

  describe('with a scheduler and a one-minute poll (the local wake-up runs a short sleep)', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [NapperFsm], {
        name: 'Napping',
        queues: { naps: 2 },
        pollInterval: 60_000,
        maxPollInterval: 60_000,
        reaper: false,
        gc: false,
      });
      await h.waitFor('scheduler:saturation'); // the boot poll ran; the next one is 60 s away
    });
    afterAll(async () => {
      await h.close();
    });

    it('a 300 ms sleep arms a wake-up and runs once due, without a poll', async () => {
      const id = await h.engine.insert(NapperFsm, { state: { ms: 300 } });
      await eventually(async () => (await sleepRow(db, id)).step === 'woke', 20_000);
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
        kind: 'done',
        result: { attempt: 0 },
      });
      expect(runs.get(id)).toEqual(['start@0', 'woke@0']);
      expect(h.engine.runtime.wakeUps.pending('naps')).toBe(0);
    });

    it('a sleep until a past instant is due at once (the commit pokes)', async () => {
      const id = await h.engine.insert(NapperFsm, {
        state: { until: new Date(Date.now() - 60_000).toISOString() },
      });
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toMatchObject({
        kind: 'done',
      });
      expect(runs.get(id)).toEqual(['start@0', 'woke@0']);
    });

    it('a sleep beyond maxPollInterval × 10 arms no wake-up and is left to the poll', async () => {
      const id = await h.engine.insert(NapperFsm, { state: { ms: 600_001 } });
      await eventually(async () => (await sleepRow(db, id)).step === 'woke', 20_000);
      expect(h.engine.runtime.wakeUps.pending('naps')).toBe(0);
      expect(await sleepRow(db, id)).toMatchObject({ status: 'runnable', due: false });
      await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [id]);
    });
  });

  describe('across restarts and nodes', () => {
    it('a one-hour sleep survives an engine restart and then runs once', async () => {
      const options = { queues: { 'naps-long': 2 }, reaper: false, gc: false } as const;
      const first = await bootEngine(db, [NapperFsm], options);
      let id: string;
      try {
        id = await first.engine.insert(NapperFsm, { state: { ms: 3_600_000 }, queue: 'naps-long' });
        await eventually(async () => (await sleepRow(db, id)).step === 'woke', 20_000);
        expect(first.engine.runtime.wakeUps.pending('naps-long')).toBe(0); // beyond the horizon
      } finally {
        await first.close();
      }
      const second = await bootEngine(db, [NapperFsm], options);
      try {
        const slept = await sleepRow(db, id);
        expect(slept).toMatchObject({ status: 'runnable', step: 'woke', attempt: 0, due: false });
        expect(slept.due_after_ms).toBeCloseTo(3_600_000, 3);
        // An hour passes: the database clock reaches eligible_at.
        await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]);
        second.engine.runtime.schedulers.get('naps-long')?.poke();
        expect(await second.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
          kind: 'done',
          result: { attempt: 0 },
        });
        expect(runs.get(id)).toEqual(['start@0', 'woke@0']);
      } finally {
        await second.close();
      }
    });

    it('rows that sleep on two nodes run each step once', async () => {
      // Two engines in one process need two names (each is a node of its own here).
      const options = (name: string) =>
        ({ name, nodeId: name, queues: { 'naps-two': 4 }, reaper: false, gc: false }) as const;
      const a = await bootEngine(db, [NapperFsm], options('NodeA'));
      const b = await bootEngine(db, [NapperFsm], options('NodeB'));
      try {
        const ids = await a.engine.insertAll(
          NapperFsm,
          Array.from({ length: 40 }, (_, i) => ({
            state: { ms: 200 + (i % 5) * 50 },
            queue: 'naps-two',
          })),
        );
        const results = await Promise.all(
          ids.map((id) => b.engine.await(id, { until: 'terminal', timeout: 30_000 })),
        );
        expect(results.every((r) => r.kind === 'done')).toBe(true);
        for (const id of ids) expect(runs.get(id)).toEqual(['start@0', 'woke@0']);
      } finally {
        await a.close();
        await b.close();
      }
    });
  });

  describe('gen-durable/testing drain', () => {
    it('runs through a sleep by default (withScheduled) and stops at it with withScheduled: false', async () => {
      const dataSource = await db.dataSource();
      const moduleRef = await Test.createTestingModule({
        imports: [
          GenDurableModule.forRoot({
            dataSource,
            name: 'NapTesting',
            queues: {},
            reaper: false,
            gc: false,
            poke: 'none',
          }),
        ],
        providers: [NapperFsm],
      }).compile();
      await moduleRef.init();
      let open = true;
      trackResource('sleep testing module', () => open);
      try {
        const engine = moduleRef.get<EngineService>(getEngineToken('NapTesting'));
        const gd = GenDurableTesting.forEngine(engine);
        const through = await engine.insert(NapperFsm, {
          state: { ms: 3_600_000 },
          queue: 'naps-drain',
        });
        expect(await gd.drain({ queue: 'naps-drain' })).toMatchObject({
          steps: 2,
          sleep: 1,
          done: 1,
          retry: 0,
        });
        await gd.assertDone(through, { attempt: 0 });

        const parked = await engine.insert(NapperFsm, {
          state: { ms: 3_600_000 },
          queue: 'naps-drain',
        });
        expect(await gd.drain({ queue: 'naps-drain', withScheduled: false })).toMatchObject({
          steps: 1,
          sleep: 1,
          done: 0,
        });
        expect(await gd.assertStatus(parked, 'runnable')).toMatchObject({
          step: 'woke',
          attempt: 0,
        });
        expect(await gd.drain({ queue: 'naps-drain' })).toMatchObject({ steps: 1, done: 1 });
        await gd.assertDone(parked);
      } finally {
        await moduleRef.close();
        open = false;
      }
    });
  });
});
