import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  type InsertOptions,
  next,
  PayloadTooLargeError,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
  UnknownStepError,
} from '../../lib';
import { bootEngine, type Harness, rowOf, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §2.7, §25.9, §26.8: bad values never take a scheduler down; they reach onError (or a
// typed error at insert) and nothing half-written remains.

const MAX_STATE_BYTES = 2048;

type Case =
  | 'bigint'
  | 'cycle'
  | 'nan'
  | 'nul'
  | 'surrogate'
  | 'oversize'
  | 'next-bigint'
  | 'throw-string'
  | 'throw-undefined'
  | 'reject-null'
  | 'plain-object'
  | 'unknown-next'
  | 'unknown-await'
  | 'unknown-children'
  | 'undefined';

/** What each onError call saw: the error's class (or typeof) and message. */
const seen = new Map<string, { type: string; message: string }>();

function describeError(err: unknown): { type: string; message: string } {
  if (err instanceof Error) return { type: err.constructor.name, message: err.message };
  return { type: err === null ? 'null' : typeof err, message: String(err) };
}

@DurableFsm({ name: 'unruly', queue: 'robust' })
class UnrulyFsm {
  @Step() async start(ctx: StepContext<{ case: Case }>): Promise<unknown> {
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    switch (ctx.state.case) {
      case 'bigint':
        return done({ big: 1n });
      case 'cycle':
        return done({ cycle });
      case 'nan':
        return done({ n: Number.NaN });
      case 'nul':
        return done({ s: 'a\u0000b' });
      case 'surrogate':
        return done({ s: 'x\ud800y' });
      case 'oversize':
        return done({ s: 'x'.repeat(MAX_STATE_BYTES) });
      case 'next-bigint':
        return next('other', { big: 2n });
      case 'throw-string':
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point: a non-Error throw
        throw 'a plain string';
      case 'throw-undefined':
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point: a non-Error throw
        throw undefined;
      case 'reject-null':
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the point: a non-Error rejection
        return Promise.reject(null);
      case 'plain-object':
        return { kind: 'next', step: 'other', state: {} };
      case 'unknown-next':
        return next('nowhere', {});
      case 'unknown-await':
        return awaitSignal('go', 'nowhere', {});
      case 'unknown-children':
        return scheduleChildren('nowhere', [], {});
      case 'undefined':
        return undefined;
    }
  }
  @Step() other() {
    return done({});
  }
  onError(err: unknown, ctx: StepContext) {
    seen.set(ctx.id, describeError(err));
    expect(ctx.awaited).toEqual([]);
    return stop(`handled ${describeError(err).type}`);
  }
}

@DurableFsm({ name: 'defaulted', queue: 'robust' })
class DefaultOnErrorFsm {
  @Step() async start(
    ctx: StepContext<{ case: 'string' | 'undefined' | 'null' | 'error' }>,
  ): Promise<unknown> {
    switch (ctx.state.case) {
      case 'string':
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point: a non-Error throw
        throw 'just a string';
      case 'undefined':
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point: a non-Error throw
        throw undefined;
      case 'null':
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the point: a non-Error rejection
        return Promise.reject(null);
      case 'error':
        throw new TypeError('a real error');
    }
  }
}

@DurableFsm({ name: 'bad-handler', queue: 'robust' })
class BadHandlerFsm {
  @Step() start(): never {
    throw new Error('step failed');
  }
  onError(_err: unknown, ctx: StepContext<{ mode: 'throw' | 'invalid' | 'unserializable' }>) {
    if (ctx.state.mode === 'throw') throw new RangeError('onError itself failed');
    if (ctx.state.mode === 'invalid') return { not: 'an outcome' };
    return done({ big: 3n });
  }
}

@DurableFsm({ name: 'healthy', queue: 'robust' })
class HealthyFsm {
  @Step() start(ctx: StepContext<{ list: number[]; nested: { deep: string } }>) {
    return next('finish', { ...ctx.state, visited: true });
  }
  @Step() finish(ctx: StepContext) {
    return done({ echoed: ctx.state });
  }
}

describe('robustness (docs/design.md §25.9, §26.8)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [UnrulyFsm, DefaultOnErrorFsm, BadHandlerFsm, HealthyFsm], {
      queues: { robust: 4 },
      maxStateBytes: MAX_STATE_BYTES,
      reaper: false,
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const failedWith = async (id: string) => {
    const r = await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(r.kind).toBe('failed');
    return r.kind === 'failed' ? r.error : '';
  };

  it("stores state, result and nested arrays as JSON objects (jsonb_typeof = 'object')", async () => {
    const id = await h.engine.insert(HealthyFsm, {
      state: { list: [1, 2, 3], nested: { deep: 'x' } },
    });
    const { rows: first } = await db.pool.query(
      `SELECT jsonb_typeof(state) AS s, jsonb_typeof(state->'list') AS l FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(first[0]).toEqual({ s: 'object', l: 'array' });
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { echoed: { list: [1, 2, 3], nested: { deep: 'x' }, visited: true } },
    });
    const { rows } = await db.pool.query(
      `SELECT jsonb_typeof(state) AS s, jsonb_typeof(result) AS r, jsonb_typeof(result->'echoed'->'list') AS l
         FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ s: 'object', r: 'object', l: 'array' });
  });

  it.each([
    ['bigint', 'InvalidInputError', /done\.result\.big.*bigint/],
    ['cycle', 'InvalidInputError', /done\.result\.cycle\.self.*circular/],
    ['nan', 'InvalidInputError', /done\.result\.n.*NaN/],
    ['nul', 'InvalidInputError', /done\.result\.s.*\\u0000/],
    ['surrogate', 'InvalidInputError', /done\.result\.s.*lone surrogate/],
    ['oversize', 'PayloadTooLargeError', /done\.result.*2048-byte limit/],
    ['next-bigint', 'InvalidInputError', /next\.state\.big.*bigint/],
  ] as const)('an unserializable outcome (%s) reaches onError', async (c, type, message) => {
    const id = await h.engine.insert(UnrulyFsm, { state: { case: c } });
    expect(await failedWith(id)).toBe(`handled ${type}`);
    expect(seen.get(id)?.type).toBe(type);
    expect(seen.get(id)?.message).toMatch(message);
  });

  it.each([
    ['throw-string', 'string', 'a plain string'],
    ['throw-undefined', 'undefined', 'undefined'],
    ['reject-null', 'null', 'null'],
  ] as const)('a non-Error throw (%s) reaches onError as thrown', async (c, type, message) => {
    const id = await h.engine.insert(UnrulyFsm, { state: { case: c } });
    expect(await failedWith(id)).toBe(`handled ${type}`);
    expect(seen.get(id)).toEqual({ type, message });
  });

  it.each([
    ['plain-object', 'InvalidOutcomeError', /returned an object that is not an outcome/],
    ['undefined', 'InvalidOutcomeError', /returned undefined/],
    ['unknown-next', 'UnknownStepError', /no step "nowhere"/],
    ['unknown-await', 'UnknownStepError', /no step "nowhere"/],
    ['unknown-children', 'UnknownStepError', /no step "nowhere"/],
  ] as const)('an invalid outcome (%s) reaches onError', async (c, type, message) => {
    const id = await h.engine.insert(UnrulyFsm, { state: { case: c } });
    expect(await failedWith(id)).toBe(`handled ${type}`);
    expect(seen.get(id)?.type).toBe(type);
    expect(seen.get(id)?.message).toMatch(message);
    // Nothing of the invalid outcome was applied.
    expect(await rowOf(db, id)).toMatchObject({ step: 'start', awaits: null, children_pending: 0 });
  });

  it.each([
    ['string', 'just a string'],
    ['undefined', 'undefined'],
    ['null', 'null'],
    ['error', /^TypeError: a real error\n\s+at DefaultOnErrorFsm\.start /u],
  ] as const)('the default onError stops with the thrown value (%s)', async (c, reason) => {
    const id = await h.engine.insert(DefaultOnErrorFsm, { state: { case: c } });
    const error = await failedWith(id);
    if (typeof reason === 'string') expect(error).toBe(reason);
    else expect(error).toMatch(reason);
  });

  it.each([
    ['throw', /^RangeError: onError itself failed\n\s+at BadHandlerFsm\.onError /u],
    ['invalid', /returned an object that is not an outcome/],
    ['unserializable', /done\.result\.big.*bigint/],
  ] as const)('an onError that fails (%s) commits stop(thatError)', async (mode, reason) => {
    const id = await h.engine.insert(BadHandlerFsm, { state: { mode } });
    const error = await failedWith(id);
    if (typeof reason === 'string') expect(error).toBe(reason);
    else expect(error).toMatch(reason);
  });

  it('an unknown FSM row takes the crash path, stays executing for the reaper, and others keep flowing', async () => {
    h.clear();
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue) VALUES ('ghost', 'start', 'robust') RETURNING id`,
    );
    const ghost = rows[0]!.id;
    const crash = await h.waitFor('executor:crash', (e) => e.metadata['id'] === ghost);
    expect(crash.metadata).toMatchObject({
      fsm: 'ghost',
      step: 'start',
      error: expect.stringContaining('no FSM "ghost"'),
    });
    const held = await rowOf(db, ghost);
    expect(held).toMatchObject({ status: 'executing', attempt: 0 });
    expect(held['locked_by']).toEqual(expect.stringContaining('GenDurable:robust@'));
    // Other rows run to completion meanwhile, on the same scheduler.
    const others = await h.engine.insertAll(
      HealthyFsm,
      Array.from({ length: 6 }, () => ({ state: { list: [], nested: { deep: '' } } })),
    );
    for (const id of others) {
      expect((await h.engine.await(id, { until: 'terminal' })).kind).toBe('done');
    }
    // The crashed row left the in-flight set: no heartbeat renews its lease (heartbeat 0.5 s).
    await sleep(1500);
    const later = await rowOf(db, ghost);
    expect(later['lease_expires_at']).toEqual(held['lease_expires_at']);
    expect(later).toMatchObject({ status: 'executing', locked_by: held['locked_by'] });
    expect(h.eventsOf('executor:crash', ghost)).toHaveLength(1);
    expect(h.engine.runtime.schedulers.get('robust')?.status).toBe('running');
  });

  describe('typed errors at insert (nothing written)', () => {
    const rowCount = async () =>
      (await db.pool.query(`SELECT count(*)::int AS n FROM gen_durable`)).rows[0].n as number;

    it.each([
      ['negative scheduleIn', { scheduleIn: -1 }, InvalidInputError, 'insert.scheduleIn'],
      ['non-integer scheduleIn', { scheduleIn: 1.5 }, InvalidInputError, 'insert.scheduleIn'],
      ['priority above smallint', { priority: 32768 }, InvalidInputError, 'insert.priority'],
      ['priority below smallint', { priority: -32769 }, InvalidInputError, 'insert.priority'],
      ['non-integer priority', { priority: 0.5 }, InvalidInputError, 'insert.priority'],
      [
        'array state',
        { state: [] as unknown as Record<string, unknown> },
        InvalidInputError,
        'insert.state',
      ],
      ['bigint in state', { state: { big: 1n } }, InvalidInputError, 'insert.state.big'],
      [
        'oversize state',
        { state: { s: 'x'.repeat(MAX_STATE_BYTES) } },
        PayloadTooLargeError,
        'insert.state',
      ],
      ['empty correlation key', { correlationKey: '' }, InvalidInputError, 'insert.correlationKey'],
      ['unknown option', { bogus: 1 }, InvalidInputError, 'insert.bogus'],
    ])('%s', async (_label, options, errorClass, path) => {
      const before = await rowCount();
      const err = await h.engine
        .insert(HealthyFsm, options as InsertOptions)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(errorClass);
      expect((err as { path: string }).path).toBe(path);
      expect(await rowCount()).toBe(before);
    });

    it('an unknown first step is an UnknownStepError', async () => {
      const before = await rowCount();
      await expect(h.engine.insert(HealthyFsm, { step: 'nowhere' })).rejects.toThrow(
        UnknownStepError,
      );
      expect(await rowCount()).toBe(before);
    });

    it('one bad entry rejects the whole insertAll before anything is written', async () => {
      const before = await rowCount();
      const entries = Array.from({ length: 10 }, (_, i) => ({
        state: i === 7 ? { n: Number.POSITIVE_INFINITY } : { n: i },
      }));
      const err = await h.engine.insertAll(HealthyFsm, entries).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).path).toBe('insertAll[7].state.n');
      expect(await rowCount()).toBe(before);
    });
  });
});
