import {
  done,
  DurableFsm,
  FsmNotRegisteredError,
  InvalidInputError,
  next,
  NoTargetError,
  Step,
  type StepContext,
  stop,
  UnknownStepError,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Fork (docs/design.md §28.3): a new instance of the same FSM at a chosen step with given,
// derived or recorded state, pointing back at its source; the source untouched; bad input is
// a typed error and writes nothing.

type OrderState = { n: number; fixed?: boolean; from?: string };

@DurableFsm({ name: 'forky', version: 1 })
class ForkyV1 {
  @Step() start(ctx: StepContext<OrderState>) {
    return next('charge', { ...ctx.state, n: ctx.state.n + 1 });
  }
  @Step() charge(ctx: StepContext<OrderState>) {
    if (!ctx.state.fixed) return stop('card declined');
    return done({ n: ctx.state.n, version: 1 });
  }
}

@DurableFsm({ name: 'forky', version: 2 })
class ForkyV2 {
  @Step() start(ctx: StepContext<OrderState>) {
    return next('charge', { ...ctx.state, n: ctx.state.n + 1 });
  }
  @Step() charge(ctx: StepContext<OrderState>) {
    if (!ctx.state.fixed) return stop('card declined');
    return done({ n: ctx.state.n, version: 2 });
  }
  @Step() refund(ctx: StepContext<OrderState>) {
    return done({ refunded: ctx.state.n });
  }
}

describe('fork (docs/design.md §28.3)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;
  let failedV1: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ForkyV1, ForkyV2], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    gd = GenDurableTesting.forEngine(h.engine);
    // A v1 instance that failed at `charge`.
    failedV1 = await h.engine.insert('forky', {
      state: { n: 1 },
      correlationKey: 'order-7',
      correlationScope: ['runnable', 'executing', 'awaiting_signal', 'awaiting_children', 'failed'],
    });
    await db.pool.query(`UPDATE gen_durable SET fsm_version = 1 WHERE id = $1`, [failedV1]);
    await gd.drain();
    expect((await h.engine.get(failedV1))?.status).toBe('failed');
  });
  afterAll(async () => {
    await h?.close();
    await db?.drop();
  });

  it('forks at the source step with a function of its state, on the newest version; the source is untouched', async () => {
    const before = await rowOf(db, failedV1);
    const fork = await h.engine.fork(failedV1, {
      state: (s: OrderState) => ({ ...s, fixed: true }),
    });
    const view = await h.engine.get(fork);
    expect(view).toMatchObject({
      fsm: 'forky',
      fsmVersion: 2,
      step: 'charge',
      status: 'runnable',
      state: { n: 2, fixed: true },
      forkedFrom: failedV1,
      correlationKey: null,
    });
    expect(await rowOf(db, failedV1)).toEqual(before);
    expect((await h.engine.get(failedV1))?.forkedFrom).toBeNull();
    await gd.drain();
    expect(await h.engine.get(fork)).toMatchObject({
      status: 'done',
      result: { n: 2, version: 2 },
    });
    // By correlation key too, at another step, with version 'same'.
    const same = await h.engine.fork(
      { correlationKey: 'order-7' },
      { version: 'same', state: { n: 9, fixed: true } },
    );
    expect(await h.engine.get(same)).toMatchObject({
      fsmVersion: 1,
      step: 'charge',
      state: { n: 9, fixed: true },
      forkedFrom: failedV1,
    });
  });

  it('a step the fork version lacks is UnknownStepError; the newest version has it', async () => {
    await expect(
      h.engine.fork(failedV1, { version: 'same', step: 'refund' }),
    ).rejects.toBeInstanceOf(UnknownStepError);
    const refund = await h.engine.fork(failedV1, { step: 'refund', actor: 'ops@example.com' });
    expect(await h.engine.get(refund)).toMatchObject({ step: 'refund', fsmVersion: 2 });
    // The fork's first history row names the source and the actor (history 'failures' records manual actions).
    const history = await h.engine.history(refund);
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({
      kind: 'manual.fork',
      step: 'refund',
      outcome: `forked from #${failedV1}`,
      actor: 'ops@example.com',
    });
  });

  it('fromHistory starts from the state and step a history row recorded', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable_history (instance_id, kind, step, next_step, state)
       VALUES ($1, 'next', 'start', 'charge', '{"n": 41, "fixed": true}'::jsonb),
              ($1, 'error', 'charge', NULL, NULL)
       RETURNING id::text`,
      [failedV1],
    );
    const fork = await h.engine.fork(failedV1, { fromHistory: rows[0]!.id });
    expect(await h.engine.get(fork)).toMatchObject({
      step: 'charge',
      state: { n: 41, fixed: true },
      forkedFrom: failedV1,
    });
    const noState = h.engine.fork(failedV1, { fromHistory: rows[1]!.id });
    await expect(noState).rejects.toBeInstanceOf(InvalidInputError);
    await expect(noState).rejects.toMatchObject({ path: 'fork.fromHistory' });
    // Another instance's history row is not this one's.
    const other = await h.engine.insert('forky', { state: { n: 0 } });
    await expect(h.engine.fork(other, { fromHistory: rows[0]!.id })).rejects.toMatchObject({
      path: 'fork.fromHistory',
    });
    await expect(h.engine.fork(other, { fromHistory: '999999999' })).rejects.toMatchObject({
      path: 'fork.fromHistory',
    });
  });

  it('bad input is a typed error and writes nothing', async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable`,
    );
    const count = rows[0]!.n;
    await expect(h.engine.fork('999999999')).rejects.toBeInstanceOf(NoTargetError);
    await expect(h.engine.fork(failedV1, { version: 'old' as never })).rejects.toMatchObject({
      path: 'fork.version',
    });
    await expect(h.engine.fork(failedV1, { actor: '' })).rejects.toMatchObject({
      path: 'fork.actor',
    });
    await expect(h.engine.fork(failedV1, { foo: 1 } as never)).rejects.toMatchObject({
      path: 'fork.options.foo',
    });
    await expect(
      h.engine.fork(failedV1, { state: { n: 1 }, fromHistory: '1' }),
    ).rejects.toMatchObject({ path: 'fork.state' });
    await expect(
      h.engine.fork(failedV1, {
        state: () => {
          throw new Error('nope');
        },
      }),
    ).rejects.toMatchObject({ path: 'fork.state' });
    await expect(h.engine.fork(failedV1, { state: [] as never })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    // A source of a version this node does not register, forked with version 'same'.
    await db.pool.query(`UPDATE gen_durable SET fsm_version = 7 WHERE id = $1`, [failedV1]);
    await expect(h.engine.fork(failedV1, { version: 'same' })).rejects.toBeInstanceOf(
      FsmNotRegisteredError,
    );
    await db.pool.query(`UPDATE gen_durable SET fsm_version = 1 WHERE id = $1`, [failedV1]);
    const after = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM gen_durable`);
    expect(after.rows[0]!.n).toBe(count);
  });
});
