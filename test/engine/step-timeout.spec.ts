import { once } from 'node:events';

import { Test } from '@nestjs/testing';

import {
  ConfigurationError,
  done,
  DrainTimeoutError,
  DurableFsm,
  EngineService,
  getEngineToken,
  GenDurableModule,
  LeaseLostError,
  retry,
  Step,
  stepAbortReason,
  type StepContext,
  StepTimeoutError,
  stop,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import {
  bootEngine,
  eventually,
  Gates,
  type Harness,
  rowOf,
  sleep,
} from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.5: every step has ctx.signal, aborted with a reason naming its cause (a
// timeout, a lost claim, shutdown's drainTimeout); a step past stepTimeout / @Step({ timeout })
// is routed as a StepTimeoutError through onError or the job retry rule, whether it honours
// the signal or not, and an abandoned step keeps its slot until it settles.

const gates = new Gates();
/** Per instance id: what each run saw, in order. */
const seen = new Map<string, { attempt: number; cause?: string; reason?: unknown }[]>();
const errors = new Map<string, unknown[]>();

function saw(ctx: StepContext<unknown>, extra: { cause?: string; reason?: unknown } = {}): void {
  seen.set(ctx.id, [...(seen.get(ctx.id) ?? []), { attempt: ctx.attempt, ...extra }]);
}

/** Resolves once `signal` aborts; never rejects. */
function aborted(signal: AbortSignal): Promise<void> {
  return signal.aborted ? Promise.resolve() : once(signal, 'abort').then(() => undefined);
}

/** Attempt 0 ignores its signal and hangs until its gate opens; a retry finishes at once. */
@DurableFsm({ name: 'hangs', queue: 'deadlines', stepTimeout: 300 })
class HangsFsm {
  @Step() async start(ctx: StepContext<{ gate: string }>) {
    saw(ctx);
    if (ctx.attempt === 0) {
      await gates.wait(ctx.state.gate);
      return done({ late: true });
    }
    return done({ attempt: ctx.attempt });
  }
  onError(err: unknown, ctx: StepContext) {
    errors.set(ctx.id, [...(errors.get(ctx.id) ?? []), err]);
    return ctx.attempt < 1 ? retry(ctx.state, 0) : stop(err);
  }
}

/** Honours its signal: rejects with the reason once it aborts. No onError: the FSM stops. */
@DurableFsm({ name: 'honours', queue: 'deadlines', stepTimeout: 60_000 })
class HonoursFsm {
  @Step({ timeout: 150 }) async start(ctx: StepContext) {
    await aborted(ctx.signal);
    const reason = stepAbortReason(ctx.signal);
    saw(ctx, { cause: reason?.abortCause, reason });
    throw reason ?? new Error('the signal aborted without a reason');
  }
  @Step('other') other() {
    return done({});
  }
}

/** A job past its timeout follows the job retry rule. */
@DurableFsm({ name: 'slow-job', queue: 'deadlines', stepTimeout: 150, maxAttempts: 2 })
class SlowJob {
  async perform(_args: unknown, ctx: StepContext) {
    saw(ctx);
    await aborted(ctx.signal);
    return { never: true };
  }
  backoff() {
    return 0;
  }
}

/** No timeout: its signal aborts only when the claim is lost. */
@DurableFsm({ name: 'leased', queue: 'deadlines' })
class LeasedFsm {
  @Step() async start(ctx: StepContext<{ gate: string }>) {
    const signal = ctx.signal;
    saw(ctx, { cause: signal.aborted ? 'aborted at start' : 'not aborted' });
    void gates.wait(ctx.state.gate);
    await aborted(signal);
    saw(ctx, { cause: stepAbortReason(signal)?.abortCause, reason: signal.reason });
    return done({ stale: true });
  }
}

/** HangsFsm with a timeout a test never waits out: the testing helper fires it. */
@DurableFsm({ name: 'hangs-long', queue: 'helper', stepTimeout: 60_000 })
class HangsLongFsm extends HangsFsm {}

/** Records why its signal aborted, then never returns: shutdown leaves its row executing. */
@DurableFsm({ name: 'stuck', queue: 'deadlines' })
class StuckFsm {
  @Step() async start(ctx: StepContext<{ gate: string }>) {
    const signal = ctx.signal;
    void gates.wait(ctx.state.gate);
    await aborted(signal);
    saw(ctx, { cause: stepAbortReason(signal)?.abortCause, reason: signal.reason });
    return new Promise<never>(() => undefined);
  }
}

describe('step deadlines and ctx.signal (docs/design.md §27.5)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    gates.openAll();
    await db.drop();
  });

  describe('on a running engine', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [HangsFsm, HonoursFsm, SlowJob, LeasedFsm], {
        queues: { deadlines: 4, 'one-slot': 1 },
        reaper: false,
        gc: false,
      });
    });
    afterAll(async () => {
      gates.openAll();
      await h.close();
    });

    it('a step that ignores its signal is routed as a StepTimeoutError to onError, retried, and its late return is dropped', async () => {
      const id = await h.engine.insert(HangsFsm, { state: { gate: 'ignored' } });
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
        kind: 'done',
        result: { attempt: 1 },
      });
      const [err] = errors.get(id) ?? [];
      expect(err).toBeInstanceOf(StepTimeoutError);
      expect(err).toMatchObject({
        code: 'GD_STEP_TIMEOUT',
        abortCause: 'timeout',
        fsm: 'hangs',
        id,
        step: 'start',
        timeoutMs: 300,
      });
      const view = await h.engine.get(id);
      expect(view?.lastError).toMatch(
        /^StepTimeoutError: step "start" of hangs#\d+ ran past its 300 ms timeout/,
      );
      expect(h.eventsOf('step:abort', id).map((e) => e.metadata['cause'])).toEqual(['timeout']);
      // The abandoned first run returns now: nothing of it commits.
      gates.open('ignored');
      await sleep(200);
      expect(await h.engine.get(id)).toMatchObject({ status: 'done', result: { attempt: 1 } });
      expect(seen.get(id)).toEqual([{ attempt: 0 }, { attempt: 1 }]);
    });

    it('@Step({ timeout }) wins over the FSM stepTimeout; a step that honours the signal sees the timeout reason', async () => {
      const definition = h.engine.runtime.registry.find('honours', 1);
      expect([...(definition?.timeouts ?? [])]).toEqual([
        ['start', 150],
        ['other', 60_000],
      ]);
      const id = await h.engine.insert(HonoursFsm);
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toMatchObject({
        kind: 'failed',
        error: expect.stringMatching(
          /^StepTimeoutError: step "start" of honours#\d+ ran past its 150 ms timeout/,
        ),
      });
      const [run] = seen.get(id) ?? [];
      expect(run?.cause).toBe('timeout');
      expect(run?.reason).toBeInstanceOf(StepTimeoutError);
    });

    it('a job past its timeout follows the job retry rule until maxAttempts', async () => {
      const id = await h.engine.insert(SlowJob);
      const result = await h.engine.await(id, { until: 'terminal', timeout: 20_000 });
      expect(result).toMatchObject({
        kind: 'failed',
        error: expect.stringMatching(
          /^StepTimeoutError: step "perform" of slow-job#\d+ ran past its 150 ms timeout/,
        ),
      });
      expect(seen.get(id)).toEqual([{ attempt: 0 }, { attempt: 1 }]);
      expect(h.eventsOf('step:abort', id)).toHaveLength(2);
    });

    it('an abandoned step keeps its slot until it settles: the retry waits for it on a one-slot queue', async () => {
      const id = await h.engine.insert(HangsFsm, { state: { gate: 'slot' }, queue: 'one-slot' });
      await gates.reached('slot');
      // The timeout outcome commits (the lease is not held past the timeout) …
      await eventually(async () => {
        const row = await rowOf(db, id);
        return row['status'] === 'runnable' && row['attempt'] === 1;
      }, 20_000);
      const scheduler = h.engine.runtime.schedulers.get('one-slot')!;
      expect(scheduler.inFlightCount).toBe(1);
      expect(scheduler.awaitingCommitCount).toBe(0);
      // … but the step still runs here, in the queue's only slot: the retry does not start.
      await sleep(600);
      expect(seen.get(id)).toEqual([{ attempt: 0 }]);
      expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', attempt: 1 });
      gates.open('slot');
      expect(await h.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
        kind: 'done',
        result: { attempt: 1 },
      });
      expect(seen.get(id)).toEqual([{ attempt: 0 }, { attempt: 1 }]);
      await eventually(async () => scheduler.inFlightCount === 0);
    });

    it('a lost claim aborts the signal with LeaseLostError at the next heartbeat; the late outcome is stale', async () => {
      const id = await h.engine.insert(LeasedFsm, { state: { gate: 'leased' } });
      await gates.reached('leased');
      // Another owner's claim: the fencing token moves on (as a reaper or a fence would).
      await db.pool.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [id]);
      await h.waitFor('outcome:stale', (e) => e.metadata['id'] === id, 20_000);
      const runs = seen.get(id) ?? [];
      expect(runs.map((r) => r.cause)).toEqual(['not aborted', 'lease-lost']);
      expect(runs[1]?.reason).toBeInstanceOf(LeaseLostError);
      expect(runs[1]?.reason).toMatchObject({ code: 'GD_LEASE_LOST', id, step: 'start' });
      expect(h.eventsOf('step:abort', id).map((e) => e.metadata['cause'])).toEqual(['lease-lost']);
      expect(await rowOf(db, id)).toMatchObject({ status: 'executing', result: null });
      await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [id]);
    });
  });

  it('shutdown past drainTimeout aborts a running step with DrainTimeoutError', async () => {
    const h = await bootEngine(db, [StuckFsm], {
      name: 'Draining',
      queues: { deadlines: 1 },
      drainTimeout: 300,
      reaper: false,
      gc: false,
    });
    let id: string;
    try {
      id = await h.engine.insert(StuckFsm, { state: { gate: 'drained' } });
      await gates.reached('drained');
    } finally {
      await h.close();
    }
    const runs = seen.get(id) ?? [];
    expect(runs.map((r) => r.cause)).toEqual(['drain-timeout']);
    expect(runs[0]?.reason).toBeInstanceOf(DrainTimeoutError);
    expect(runs[0]?.reason).toMatchObject({ code: 'GD_DRAIN_TIMEOUT', drainTimeoutMs: 300 });
    expect(h.eventsOf('step:abort', id).map((e) => e.metadata['cause'])).toEqual(['drain-timeout']);
    // The node stopped waiting: the row stays executing for the reaper (or a successor).
    expect(await rowOf(db, id)).toMatchObject({ status: 'executing' });
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [id]);
  });

  it('gen-durable/testing timeoutStep fires a running step’s timeout without waiting it out', async () => {
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          name: 'TimeoutTesting',
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
        }),
      ],
      providers: [HangsLongFsm, LeasedFsm],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('step-timeout testing module', () => open);
    try {
      const engine = moduleRef.get<EngineService>(getEngineToken('TimeoutTesting'));
      const gd = GenDurableTesting.forEngine(engine);
      // A one-minute stepTimeout: the test fires it at once instead, mid-drain.
      const id = await engine.insert(HangsLongFsm, { state: { gate: 'helper' } });
      const draining = gd.drain({ queue: 'helper' });
      await gates.reached('helper');
      expect(await gd.timeoutStep(id)).toBe(true);
      expect(await gd.timeoutStep(id)).toBe(false); // already timed out
      expect(await draining).toMatchObject({ steps: 2, retry: 1, done: 1 });
      expect(errors.get(id)?.[0]).toBeInstanceOf(StepTimeoutError);
      await gd.assertDone(id, { attempt: 1 });
      gates.open('helper');

      // A step without a timeout, or nothing running: false, nothing changes.
      const leased = await engine.insert(LeasedFsm, {
        state: { gate: 'no-timeout' },
        queue: 'helper',
      });
      const second = gd.drain({ queue: 'helper' });
      await gates.reached('no-timeout');
      expect(await gd.timeoutStep(leased)).toBe(false);
      expect(await gd.timeoutStep('999999')).toBe(false);
      // End it: its claim is taken back, so its signal aborts… only a heartbeat would see that;
      // the drain's executor is told directly, as the scheduler's heartbeat would.
      const [run] = seen.get(leased) ?? [];
      expect(run?.cause).toBe('not aborted');
      const row = await rowOf(db, leased);
      // Matched by the claim's token: an abort meant for an older claim of the row is ignored.
      expect(
        engine.runtime.executor.running.abortStep(
          leased,
          String(BigInt(String(row['claim_seq'])) - 1n),
          (r) => new LeaseLostError(r.fsm, r.id, r.step),
        ),
      ).toBe(false);
      expect(
        engine.runtime.executor.running.abortStep(
          leased,
          String(row['claim_seq']),
          (r) => new LeaseLostError(r.fsm, r.id, r.step),
        ),
      ).toBe(true);
      expect(await second).toMatchObject({ steps: 1, done: 1 });
    } finally {
      gates.openAll();
      await moduleRef.close();
      open = false;
    }
  });

  it.each([
    ['stepTimeout: 0', 'fsm bad-fsm-timeout.stepTimeout', 'got 0'],
    ['@Step({ timeout: 1.5 })', 'fsm bad-step-timeout.start.timeout', 'got 1.5'],
  ])('%s fails boot with a ConfigurationError naming %s', async (_label, path, got) => {
    @DurableFsm({ name: 'bad-fsm-timeout', stepTimeout: 0 })
    class BadFsmTimeout {
      @Step() start() {
        return done({});
      }
    }
    @DurableFsm({ name: 'bad-step-timeout' })
    class BadStepTimeout {
      @Step({ timeout: 1.5 }) start() {
        return done({});
      }
    }
    const fsm = path.includes('bad-fsm') ? BadFsmTimeout : BadStepTimeout;
    const boot = bootEngine(db, [fsm], { queues: {}, reaper: false, gc: false });
    await expect(boot).rejects.toBeInstanceOf(ConfigurationError);
    await expect(bootEngine(db, [fsm], { queues: {}, reaper: false, gc: false })).rejects.toThrow(
      `invalid gen-durable configuration at ${path}: must be an integer number of ms in 1 … 2147483647, ${got}`,
    );
  });
});
