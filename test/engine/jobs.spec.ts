import { Logger } from '@nestjs/common';
import { cancel, done, DurableFsm, jobError, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §13: a class with perform(args, ctx) is a one-step instance.

const calls = new Map<string, number[]>();
const record = (ctx: StepContext) => calls.set(ctx.id, [...(calls.get(ctx.id) ?? []), ctx.attempt]);

@DurableFsm({ name: 'results', queue: 'jobs' })
class ResultsJob {
  perform(args: { mode: string }, ctx: StepContext) {
    record(ctx);
    switch (args.mode) {
      case 'undefined':
        return undefined;
      case 'object':
        return { total: 3, args };
      case 'cancel':
        return cancel('not wanted');
      case 'number':
        return 42;
      case 'array':
        return [1, 2];
      case 'string':
        return 'ok';
      case 'date':
        return new Date(0);
      default:
        return null;
    }
  }
}

@DurableFsm({ name: 'flaky', queue: 'jobs', maxAttempts: 3 })
class FlakyJob {
  async perform(args: { mode: 'jobError' | 'throw' | 'cancel-later' }, ctx: StepContext) {
    record(ctx);
    if (args.mode === 'cancel-later' && ctx.attempt === 1) return cancel(new Error('gave up'));
    if (args.mode === 'throw') throw new Error(`boom ${ctx.attempt}`);
    return jobError(`failed ${ctx.attempt}`);
  }
  backoff() {
    return 0;
  }
}

@DurableFsm({ name: 'slow-backoff', queue: 'jobs-parked' })
class DefaultBackoffJob {
  perform(_args: unknown, ctx: StepContext) {
    record(ctx);
    return jobError('again');
  }
}

@DurableFsm({ name: 'custom-backoff', queue: 'jobs-parked' })
class CustomBackoffJob {
  perform(_args: unknown, ctx: StepContext) {
    record(ctx);
    throw new Error('again');
  }
  backoff(attempt: number) {
    return 1234 * (attempt + 1);
  }
}

@DurableFsm({ name: 'handled', queue: 'jobs', maxAttempts: 2 })
class HandledJob {
  perform(args: { mode: 'throw' | 'jobError' }, ctx: StepContext) {
    record(ctx);
    if (args.mode === 'throw') throw new Error('thrown');
    return jobError('reported');
  }
  backoff() {
    return 0;
  }
  onError(err: unknown) {
    return done({ recovered: (err as Error).message });
  }
}

@DurableFsm({ name: 'logged', queue: 'jobs', maxAttempts: 2 })
class LoggedJob {
  perform(_args: { secret: string }, ctx: StepContext) {
    record(ctx);
    throw new RangeError(`logged ${ctx.attempt}`);
  }
  backoff() {
    return 0;
  }
}

describe('jobs (docs/design.md §13)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(
      db,
      [ResultsJob, FlakyJob, DefaultBackoffJob, CustomBackoffJob, HandledJob, LoggedJob],
      {
        queues: { jobs: 4, 'jobs-parked': 1 },
        reaper: false,
        gc: false,
      },
    );
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const terminal = (id: string) => h.engine.await(id, { until: 'terminal', timeout: 10_000 });

  it('undefined ⇒ done({}); a plain object ⇒ done(object)', async () => {
    const a = await h.engine.insert(ResultsJob, { args: { mode: 'undefined' } });
    const b = await h.engine.insert(ResultsJob, { args: { mode: 'object' } });
    expect(await terminal(a)).toEqual({ kind: 'done', result: {} });
    expect(await terminal(b)).toEqual({
      kind: 'done',
      result: { total: 3, args: { mode: 'object' } },
    });
  });

  it('cancel ⇒ stop at once, attempt unchanged', async () => {
    const id = await h.engine.insert(ResultsJob, { args: { mode: 'cancel' } });
    expect(await terminal(id)).toEqual({ kind: 'failed', error: 'not wanted' });
    expect(await rowOf(db, id)).toMatchObject({ status: 'failed', attempt: 0 });
    expect(calls.get(id)).toEqual([0]);
    const later = await h.engine.insert(FlakyJob, { args: { mode: 'cancel-later' } });
    expect(await terminal(later)).toEqual({ kind: 'failed', error: 'gave up' });
    expect(await rowOf(db, later)).toMatchObject({ attempt: 1 });
    expect(calls.get(later)).toEqual([0, 1]);
  });

  it.each([
    ['number', '42'],
    ['array', '[ 1, 2 ]'],
    ['string', "'ok'"],
    ['null', 'null'],
    ['date', '1970-01-01T00:00:00.000Z'],
  ])('an invalid return (%s) ⇒ stop naming the value', async (mode, shown) => {
    const id = await h.engine.insert(ResultsJob, { args: { mode } });
    expect(await terminal(id)).toEqual({
      kind: 'failed',
      error: `perform returned an invalid value: ${shown}`,
    });
    expect(calls.get(id)).toEqual([0]);
  });

  it.each(['jobError', 'throw'] as const)(
    '%s ⇒ retried until maxAttempts executions, then stop(reason)',
    async (mode) => {
      const id = await h.engine.insert(FlakyJob, { args: { mode } });
      // A throw keeps its class, message and stack frames; a jobError keeps its reason as given.
      const reason = mode === 'throw' ? /^Error: boom 2\n\s+at FlakyJob\.perform /u : /^failed 2$/u;
      expect(await terminal(id)).toEqual({ kind: 'failed', error: expect.stringMatching(reason) });
      expect(calls.get(id)).toEqual([0, 1, 2]);
      expect(await rowOf(db, id)).toMatchObject({ attempt: 2, status: 'failed' });
    },
  );

  it('default backoff is min(1000 · 2^attempt, 300 000) ms on the database clock', async () => {
    const id = await h.engine.insert(DefaultBackoffJob);
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      await eventually(async () => (await rowOf(db, id))['attempt'] === attempt);
      const { rows } = await db.pool.query(
        `SELECT (extract(epoch FROM eligible_at - updated_at) * 1000)::int AS delay, status FROM gen_durable WHERE id = $1`,
        [id],
      );
      expect(rows[0].status).toBe('runnable');
      delays.push(rows[0].delay as number);
      await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [id]); // skip the wait
    }
    expect(delays).toEqual([1000, 2000, 4000]);
    await eventually(async () => (await rowOf(db, id))['attempt'] === 4);
    await db.pool.query(`UPDATE gen_durable SET attempt = 12, eligible_at = now() WHERE id = $1`, [
      id,
    ]);
    await eventually(async () => (await rowOf(db, id))['attempt'] === 13);
    const { rows } = await db.pool.query(
      `SELECT (extract(epoch FROM eligible_at - updated_at) * 1000)::int AS delay FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0].delay).toBe(300_000);
  });

  it('a backoff(attempt) method sets the delay', async () => {
    const id = await h.engine.insert(CustomBackoffJob);
    await eventually(async () => (await rowOf(db, id))['attempt'] === 1);
    const { rows } = await db.pool.query(
      `SELECT (extract(epoch FROM eligible_at - updated_at) * 1000)::int AS delay FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0].delay).toBe(1234);
    // While it backs off, last_error already holds the retried throw.
    expect((await rowOf(db, id))['last_error']).toMatch(
      /^Error: again\n\s+at CustomBackoffJob\.perform /u,
    );
  });

  it('a thrown step is logged: warn while it is retried, error with the stack when it stops; never args or state', async () => {
    const warned: string[] = [];
    const errored: { message: string; stack: unknown }[] = [];
    const warnSpy = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => {
      warned.push(String(message));
    });
    const errorSpy = jest
      .spyOn(Logger.prototype, 'error')
      .mockImplementation((message: unknown, stack?: unknown) => {
        errored.push({ message: String(message), stack });
      });
    try {
      const id = await h.engine.insert(LoggedJob, { args: { secret: 'hunter2' } });
      const end = await terminal(id);
      expect(end).toEqual({
        kind: 'failed',
        error: expect.stringMatching(/^RangeError: logged 1\n\s+at LoggedJob\.perform /u),
      });
      const mine = (line: string) => line.includes(`logged#${id} `);
      expect(warned.filter(mine)).toEqual([
        `step "perform" of logged#${id} (attempt 0) threw RangeError: logged 0; retried in 0 ms`,
      ]);
      const stops = errored.filter((e) => mine(e.message));
      expect(stops.map((e) => e.message)).toEqual([
        `step "perform" of logged#${id} (attempt 1) threw RangeError: logged 1; the instance fails`,
      ]);
      expect(stops[0]!.stack).toMatch(/^RangeError: logged 1\n\s+at LoggedJob\.perform /u);
      const everything = [...warned, ...errored.map((e) => `${e.message} ${String(e.stack)}`)];
      expect(everything.filter((line) => line.includes('hunter2'))).toEqual([]);
    } finally {
      warnSpy.mockRestore();
      errorSpy.mockRestore();
    }
  });

  it('a class onError replaces the rule for throws; jobError keeps the built-in rule', async () => {
    const thrown = await h.engine.insert(HandledJob, { args: { mode: 'throw' } });
    expect(await terminal(thrown)).toEqual({ kind: 'done', result: { recovered: 'thrown' } });
    expect(calls.get(thrown)).toEqual([0]);
    const reported = await h.engine.insert(HandledJob, { args: { mode: 'jobError' } });
    expect(await terminal(reported)).toEqual({ kind: 'failed', error: 'reported' });
    expect(calls.get(reported)).toEqual([0, 1]);
  });
});
