import { AssertionError } from 'node:assert';

import { Test } from '@nestjs/testing';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  MaxStepsExceededError,
  next,
  retry,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

@DurableFsm({ name: 'order' })
class OrderFsm {
  @Step() start(ctx: StepContext<{ order: number }>) {
    return awaitSignal('paid', 'ship', ctx.state, { timeout: 60_000 });
  }
  @Step() ship(ctx: StepContext<{ order: number }>) {
    if (ctx.awaited.length === 0) return stop('payment timed out');
    return done({ order: ctx.state.order, paid: ctx.awaited[0]?.payload });
  }
}

@DurableFsm({ name: 'flaky' })
class FlakyFsm {
  @Step() start(ctx: StepContext<{ tries: number }>) {
    return ctx.attempt < 2
      ? retry({ tries: ctx.attempt + 1 }, 60_000)
      : done({ tries: ctx.attempt });
  }
}

@DurableFsm({ name: 'forever' })
class ForeverFsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return next('start', { n: ctx.state.n + 1 });
  }
}

@DurableFsm({ name: 'parent' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren(
      'joined',
      [{ fsm: 'flaky' }, { fsm: 'flaky', queue: 'other' }],
      ctx.state,
    );
  }
  @Step() joined(ctx: StepContext) {
    return done({ children: ctx.children.map((c) => c.status) });
  }
}

describe('gen-durable/testing', () => {
  let db: TestDatabase;
  let engine: EngineService;
  let gd: GenDurableTesting;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createTestDatabase();
    const dataSource = await db.dataSource();
    // The way a host app writes it: the engine as a web node, driven inline.
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
        }),
      ],
      providers: [OrderFsm, FlakyFsm, ForeverFsm, ParentFsm],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('testing module', () => open);
    close = async () => {
      await moduleRef.close();
      open = false;
    };
    engine = moduleRef.get(EngineService);
    gd = GenDurableTesting.forEngine(engine);
  });
  afterAll(async () => {
    await close();
    await db.drop();
  });
  beforeEach(() => gd.reset());

  it('drains an order through signal and completion', async () => {
    const id = await engine.insert(OrderFsm, { state: { order: 42 }, correlationKey: 'order:42' });
    expect(await gd.drain()).toMatchObject({ steps: 1, await: 1 });
    await gd.assertAwaiting({ id }, 'paid');
    await gd.assertStatus({ correlationKey: 'order:42' }, 'awaiting_signal');
    await engine.signal({ id }, 'paid', { amount: 100 });
    expect(await gd.drain()).toEqual({
      steps: 1,
      next: 0,
      retry: 0,
      sleep: 0,
      await: 0,
      scheduleChildren: 0,
      done: 1,
      stop: 0,
      throttle: 0,
      cancelled: 0,
    });
    await gd.assertDone({ id }, { order: 42, paid: { amount: 100 } });
    // by key, the finished row is still found (latest row for the key)
    expect((await gd.get({ correlationKey: 'order:42' }))?.id).toBe(id);
    expect((await engine.get({ correlationKey: 'order:42' }))?.id).toBe(id);
  });

  it('fireTimeouts wakes parked rows at once', async () => {
    const id = await engine.insert(OrderFsm, { state: { order: 1 } });
    await gd.drain();
    expect(await gd.fireTimeouts()).toBe(1);
    expect(await gd.drain()).toMatchObject({ stop: 1 });
    await gd.assertFailed({ id }, 'payment timed out');
    await gd.assertFailed({ id }, /timed out/);
  });

  it('withScheduled pulls retry backoffs and delays; withScheduled false leaves them', async () => {
    const id = await engine.insert(FlakyFsm, { scheduleIn: 60_000 });
    expect(await gd.drain({ withScheduled: false })).toMatchObject({ steps: 0 });
    expect(await gd.drain()).toMatchObject({ steps: 3, retry: 2, done: 1 });
    await gd.assertDone({ id }, { tries: 2 });
  });

  it('queue restricts the drain; children join within the same drain', async () => {
    const parent = await engine.insert(ParentFsm);
    expect(await gd.drain({ queue: 'other' })).toMatchObject({ steps: 0 });
    const tally = await gd.drain();
    expect(tally).toMatchObject({ scheduleChildren: 1, done: 3 });
    await gd.assertDone({ id: parent }, { children: ['done', 'done'] });
  });

  it('maxSteps stops a looping FSM with MaxStepsExceededError', async () => {
    await engine.insert(ForeverFsm, { state: { n: 0 } });
    await expect(gd.drain({ maxSteps: 5 })).rejects.toBeInstanceOf(MaxStepsExceededError);
  });

  it('failing assertions name the step, the attempt and the last error', async () => {
    const id = await engine.insert(OrderFsm, { state: { order: 7 } });
    await gd.drain();
    await gd.fireTimeouts();
    await gd.drain();
    const err = await gd.assertDone({ id }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AssertionError);
    expect((err as Error).message).toMatch(
      /expected status done, but it is failed at step "ship" \(attempt 0, last error: payment timed out\)/,
    );
    await expect(gd.assertAwaiting({ id })).rejects.toThrow(/expected status awaiting_signal/);
    await expect(gd.assertStatus({ id: '999999' }, 'done')).rejects.toThrow(
      /no instance for id 999999/,
    );
    await expect(gd.assertFailed({ id }, 'other')).rejects.toThrow(/expected last error other/);
    const done2 = await engine.insert(FlakyFsm);
    await gd.drain();
    await expect(gd.assertDone({ id: done2 }, { tries: 9 })).rejects.toThrow(
      /expected result \{"tries":9\}, got \{"tries":2\}/,
    );
  });

  it('reset empties the tables', async () => {
    await engine.insert(OrderFsm, { state: { order: 1 } });
    await gd.reset();
    expect((await db.pool.query('SELECT count(*)::int AS n FROM gen_durable')).rows[0].n).toBe(0);
  });
});
