import { z } from 'zod';

import {
  awaitSignal,
  done,
  DurableFsm,
  type FsmSchemas,
  InvalidInputError,
  scheduleChildren,
  type SchemaStepContext,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/schemas.md: inserts, signals and results validated with Standard Schemas (zod here).

const orderSchemas = {
  state: z.object({
    sku: z.string().min(1),
    qty: z.number().int().positive(),
    note: z.string().trim().default(''),
  }),
  signals: { paid: z.object({ amount: z.number().positive(), via: z.string().default('card') }) },
  result: z.object({ total: z.number(), via: z.string(), currency: z.string().default('EUR') }),
} satisfies FsmSchemas;

@DurableFsm({ name: 'typed-order', ...orderSchemas })
class OrderFsm {
  declare readonly '~schemas'?: typeof orderSchemas;

  @Step() start(ctx: SchemaStepContext<typeof orderSchemas>) {
    return awaitSignal('paid', 'finish', ctx.state);
  }

  @Step() finish(ctx: SchemaStepContext<typeof orderSchemas>) {
    const paid = ctx.awaited.find((s) => s.name === 'paid');
    if (ctx.state.sku === 'bad-result') return done({ total: 'not a number', via: 'card' });
    return done({
      total: (paid?.payload.amount ?? 0) * ctx.state.qty,
      via: paid?.payload.via,
      extra: 1,
    });
  }
}

/** Every schema answers a promise (zod's async refinements). */
const asyncSchemas = {
  state: z.object({ code: z.string() }).refine(async (s) => Promise.resolve(s.code !== 'taken'), {
    message: 'code is taken',
    path: ['code'],
  }),
  signals: {
    go: z.object({ n: z.number() }).refine(async (p) => Promise.resolve(p.n < 10), {
      message: 'n too large',
      path: ['n'],
    }),
  },
  result: z.object({ code: z.string() }).refine(async (r) => Promise.resolve(r.code !== 'x'), {
    message: 'bad code',
    path: ['code'],
  }),
} satisfies FsmSchemas;

@DurableFsm({ name: 'typed-async', ...asyncSchemas })
class AsyncFsm {
  declare readonly '~schemas'?: typeof asyncSchemas;

  @Step() start(ctx: SchemaStepContext<typeof asyncSchemas>) {
    return awaitSignal('go', 'finish', ctx.state);
  }

  @Step() finish(ctx: SchemaStepContext<typeof asyncSchemas>) {
    return done({ code: ctx.state.code === 'end-x' ? 'x' : ctx.state.code });
  }
}

@DurableFsm({ name: 'typed-parent' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren('finish', [{ fsm: OrderFsm, state: ctx.state['child'] as never }], {});
  }

  @Step() finish() {
    return done({});
  }
}

/** The message the schema itself gives for `value` (its first issue). */
function schemaMessage(schema: z.ZodType, value: unknown): string {
  const parsed = schema.safeParse(value);
  if (parsed.success) throw new Error('expected the schema to refuse the value');
  return parsed.error.issues[0]!.message;
}

/** The stored error's first line (a thrown error is stored with its stack). */
function failure(settled: Awaited<ReturnType<Harness['engine']['await']>>): string {
  expect(settled.kind).toBe('failed');
  return settled.kind === 'failed' ? settled.error.split('\n')[0]! : '';
}

async function refusal(promise: Promise<unknown>): Promise<InvalidInputError> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidInputError);
  return err as InvalidInputError;
}

describe('typed schemas (docs/schemas.md)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [OrderFsm, AsyncFsm, ParentFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  async function rowCount(fsm: string): Promise<number> {
    const { rows } = await db.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM gen_durable WHERE fsm = $1',
      [fsm],
    );
    return Number(rows[0]!.n);
  }

  it('refuses an insert with the schema message and path; nothing is written', async () => {
    const before = await rowCount('typed-order');
    const err = await refusal(t.engine.insert(OrderFsm, { state: { sku: '', qty: 1 } }));
    expect(err.path).toBe('insert.state.sku');
    const message = schemaMessage(orderSchemas.state, { sku: '', qty: 1 });
    expect(err.message).toBe(`invalid insert.state.sku: ${message}`);
    // The untyped forms are validated too.
    const all = await refusal(
      t.engine.insertAll('typed-order', [{ state: { sku: 'a', qty: 1 } }, { state: { qty: 0 } }]),
    );
    expect(all.path).toBe('insertAll[1].state.sku');
    const later = await refusal(t.engine.insertAsync('typed-order', { state: { sku: 'a' } }));
    expect(later.path).toBe('insertAsync.state.qty');
    expect(await rowCount('typed-order')).toBe(before);
  });

  it("stores the schema's output: a valid insert, signal and result are transformed", async () => {
    const id = await t.engine.insert(OrderFsm, { state: { sku: 'a', qty: 3, note: '  hi  ' } });
    expect(await t.engine.await(id)).toMatchObject({ kind: 'awaiting' });
    expect((await t.engine.get({ id }))?.state).toEqual({ sku: 'a', qty: 3, note: 'hi' });
    await t.engine.signal(OrderFsm, { id }, 'paid', { amount: 5 });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { total: 15, via: 'card', currency: 'EUR' },
    });
  });

  it('refuses a signal payload, typed or not, before anything is stored', async () => {
    const id = await t.engine.insert(OrderFsm, { state: { sku: 'b', qty: 1 } });
    const typed = await refusal(t.engine.signal(OrderFsm, { id }, 'paid', { amount: -1 }));
    expect(typed.path).toBe('signal.payload.amount');
    expect(typed.message).toBe(
      `invalid signal.payload.amount: ${schemaMessage(orderSchemas.signals.paid, { amount: -1 })}`,
    );
    const untyped = await refusal(t.engine.signal({ id }, 'paid', { amount: 'ten' }));
    expect(untyped.path).toBe('signal.payload.amount');
    expect(await t.engine.inbox({ id })).toEqual([]);
    await t.engine.signal({ id }, 'paid', { amount: 2, via: 'wire' });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { total: 2, via: 'wire', currency: 'EUR' },
    });
  });

  it("validates an untyped signal in the caller's transaction, to a target inserted in it", async () => {
    const dataSource = await db.dataSource();
    const id = await dataSource.transaction(async (manager) => {
      const inserted = await t.engine.insert(OrderFsm, { state: { sku: 'tx', qty: 1 }, manager });
      const err = await refusal(
        t.engine.signal({ id: inserted }, 'paid', { amount: 0 }, { manager }),
      );
      expect(err.path).toBe('signal.payload.amount');
      await t.engine.signal({ id: inserted }, 'paid', { amount: 3 }, { manager });
      return inserted;
    });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { total: 3, via: 'card', currency: 'EUR' },
    });
  });

  it('a result the schema refuses fails the step, naming the field', async () => {
    const id = await t.engine.insert(OrderFsm, { state: { sku: 'bad-result', qty: 1 } });
    await t.engine.signal(OrderFsm, { id }, 'paid', { amount: 1 });
    const settled = await t.engine.await(id, { until: 'terminal' });
    const message = schemaMessage(orderSchemas.result, { total: 'not a number', via: 'card' });
    expect(failure(settled)).toBe(`InvalidInputError: invalid done.result.total: ${message}`);
  });

  it("validates a scheduled child's state with its FSM's schema", async () => {
    const bad = await t.engine.insert(ParentFsm, { state: { child: { sku: 'c', qty: -2 } } });
    expect(failure(await t.engine.await(bad, { until: 'terminal' }))).toMatch(
      /^InvalidInputError: invalid scheduleChildren\.children\[0\]\.state\.qty: /,
    );
    const good = await t.engine.insert(ParentFsm, { state: { child: { sku: 'c', qty: 2 } } });
    expect(await t.engine.await(good)).toMatchObject({ kind: 'awaiting' });
    const [child] = (await t.engine.list({ fsm: 'typed-order', parentId: good })).items;
    expect(child?.state).toEqual({ sku: 'c', qty: 2, note: '' });
  });

  it('async schemas refuse and pass on insert, signal and result', async () => {
    const taken = await refusal(t.engine.insert(AsyncFsm, { state: { code: 'taken' } }));
    expect(taken.message).toBe('invalid insert.state.code: code is taken');
    const id = await t.engine.insert(AsyncFsm, { state: { code: 'ok' } });
    const big = await refusal(t.engine.signal(AsyncFsm, { id }, 'go', { n: 11 }));
    expect(big.message).toBe('invalid signal.payload.n: n too large');
    await t.engine.signal(AsyncFsm, { id }, 'go', { n: 1 });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { code: 'ok' },
    });
    const ends = await t.engine.insert(AsyncFsm, { state: { code: 'end-x' } });
    await t.engine.signal({ id: ends }, 'go', { n: 2 });
    expect(failure(await t.engine.await(ends, { until: 'terminal' }))).toBe(
      'InvalidInputError: invalid done.result.code: bad code',
    );
  });
});
