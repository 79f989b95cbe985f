import { DataSource } from 'typeorm';
import { Test } from '@nestjs/testing';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  getEngineToken,
  GenDurableModule,
  InvalidInputError,
  retry,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { bootEngine, eventually, FAST, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Caller-side await (docs/design.md §9, §25 item 10): answers from the row, same-node push from
// committed outcomes, a batched cross-node probe per tick while waiters exist (no timer
// otherwise), busy as the retry protocol, and shutdown never rejecting a waiter.

const gates = new Map<string, { opened: Promise<void>; open(): void; entered: boolean }>();
function gate(id: string): { opened: Promise<void>; open(): void; entered: boolean } {
  let g = gates.get(id);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { opened, open, entered: false };
    gates.set(id, g);
  }
  return g;
}

type OrderState = { backoffMs?: number; gated?: boolean; fail?: string };

@DurableFsm({ name: 'order' })
class OrderFsm {
  @Step() async start(ctx: StepContext<OrderState>) {
    if (ctx.state.fail) return stop(ctx.state.fail);
    if (ctx.state.backoffMs !== undefined && ctx.attempt === 0) {
      return retry(ctx.state, ctx.state.backoffMs);
    }
    if (ctx.state.gated) {
      const g = gate(ctx.id);
      g.entered = true;
      await g.opened;
    }
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() ship(ctx: StepContext<OrderState>) {
    return done({ shipped: ctx.awaited.map((s) => s.payload) });
  }
}

/** Counts the statements of one engine by name after a marker index. */
function countAfter(statements: readonly string[], from: number, name: string): number {
  return statements.slice(from).filter((s) => s === name).length;
}

describe('caller-side await (docs/design.md §9)', () => {
  let db: TestDatabase;
  let worker: Harness;
  let web: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    // The worker's probe tick is long, so its waiters can only be woken by same-node pushes
    // (or the 1 s re-arm); the web node runs no queues and only awaits (tick 25 ms).
    worker = await bootEngine(db, [OrderFsm], {
      queues: { default: 4 },
      await: { tick: 60_000 },
    });
    web = await bootEngine(db, [OrderFsm], {
      name: 'Web',
      queues: {},
      reaper: false,
      gc: false,
      await: { tick: 25 },
    });
  });
  afterAll(async () => {
    await web.close();
    await worker.close();
    await db.drop();
  });

  const parked = async (engine: EngineService, id: string): Promise<boolean> =>
    (await engine.get({ id }))?.status === 'awaiting_signal';

  it('answers from the row: awaiting for parked rows, done with the result, failed, not_found', async () => {
    const id = await worker.engine.insert(OrderFsm);
    expect(await worker.engine.await(id)).toEqual({
      kind: 'awaiting',
      snapshot: { status: 'awaiting_signal', step: 'ship', attempt: 0 },
    });
    await worker.engine.signal({ id }, 'paid', { amount: 5 });
    expect(await worker.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { shipped: [{ amount: 5 }] },
    });
    const failed = await worker.engine.insert(OrderFsm, { state: { fail: 'declined' } });
    expect(await worker.engine.await(failed)).toEqual({ kind: 'failed', error: 'declined' });
    expect(await web.engine.await(failed, { until: 'terminal' })).toEqual({
      kind: 'failed',
      error: 'declined',
    });
    expect(await web.engine.await('123456789')).toEqual({ kind: 'not_found' });
  });

  it('awaiting vs terminal: a terminal waiter ignores the parked row and answers busy at its deadline', async () => {
    const id = await worker.engine.insert(OrderFsm);
    await eventually(() => parked(worker.engine, id));
    expect(await worker.engine.await(id, { timeout: 1000 })).toMatchObject({ kind: 'awaiting' });
    expect(await worker.engine.await(id, { until: 'terminal', timeout: 150 })).toEqual({
      kind: 'busy',
      snapshot: { status: 'awaiting_signal', step: 'ship', attempt: 0 },
    });
    // Cross-node too: the probe does not wake a terminal waiter for a parked row.
    const from = web.statements.length;
    expect(await web.engine.await(id, { until: 'terminal', timeout: 300 })).toMatchObject({
      kind: 'busy',
    });
    expect(countAfter(web.statements, from, 'probe_statuses')).toBeGreaterThan(0);
    expect(countAfter(web.statements, from, 'get_instance_by_id')).toBe(2);
  });

  it('busy is the retry protocol: a running or backing-off row answers busy, calling again gets the result', async () => {
    const id = await worker.engine.insert(OrderFsm, { state: { gated: true } });
    await eventually(async () => gate(id).entered);
    expect(await worker.engine.await(id, { timeout: 100 })).toEqual({
      kind: 'busy',
      snapshot: { status: 'executing', step: 'start', attempt: 0 },
    });
    gate(id).open();
    expect(await worker.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'awaiting' });

    const backoff = await worker.engine.insert(OrderFsm, { state: { backoffMs: 60_000 } });
    await eventually(async () => (await worker.engine.get({ id: backoff }))?.attempt === 1);
    expect(await worker.engine.await(backoff, { timeout: 50 })).toEqual({
      kind: 'busy',
      snapshot: { status: 'runnable', step: 'start', attempt: 1 },
    });
    expect(await worker.engine.await(backoff, { timeout: 0 })).toMatchObject({ kind: 'busy' });
  });

  it('same-node push: the committing node nudges its waiter at once (no probe, no re-arm)', async () => {
    const id = await worker.engine.insert(OrderFsm, { state: { gated: true } });
    await eventually(async () => gate(id).entered);
    const from = worker.statements.length;
    const answer = worker.engine.await(id, { timeout: 20_000 });
    await eventually(
      async () => countAfter(worker.statements, from, 'get_instance_by_id') === 1,
      5000,
      1,
    );
    gate(id).open();
    expect(await answer).toMatchObject({
      kind: 'awaiting',
      snapshot: { status: 'awaiting_signal' },
    });
    // One read to register, one after the nudge: the 1 s re-arm never fired, the 60 s tick
    // never probed, so the commit's nudge woke the waiter.
    expect(countAfter(worker.statements, from, 'get_instance_by_id')).toBe(2);
    expect(countAfter(worker.statements, from, 'probe_statuses')).toBe(0);
  });

  it('cross-node tick: a node that only awaits learns of another node’s commit by its batched probe', async () => {
    const ids = [await worker.engine.insert(OrderFsm), await worker.engine.insert(OrderFsm)];
    for (const id of ids) await eventually(() => parked(worker.engine, id));
    const from = web.statements.length;
    const answers = ids.map((id) => web.engine.await(id, { until: 'terminal', timeout: 20_000 }));
    await eventually(async () => countAfter(web.statements, from, 'probe_statuses') >= 2, 5000, 1);
    expect(web.engine.runtime.watcher.waiting).toBe(2);
    for (const id of ids) await worker.engine.signal({ id }, 'paid', { id });
    const results = await Promise.all(answers);
    expect(results).toEqual(ids.map((id) => ({ kind: 'done', result: { shipped: [{ id }] } })));
    // Two registering reads and two final reads: woken by the probe, before any 1 s re-arm.
    expect(countAfter(web.statements, from, 'get_instance_by_id')).toBe(4);
    expect(web.engine.runtime.watcher.waiting).toBe(0);
  });

  it('no timer runs when nobody waits', async () => {
    const watcher = web.engine.runtime.watcher;
    expect(watcher.waiting).toBe(0);
    expect(watcher.probeArmed).toBe(false);
    const from = web.statements.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(countAfter(web.statements, from, 'probe_statuses')).toBe(0);

    const id = await worker.engine.insert(OrderFsm);
    await eventually(() => parked(worker.engine, id));
    const answer = web.engine.await(id, { until: 'terminal', timeout: 200 });
    await eventually(async () => watcher.probeArmed, 5000, 1);
    expect(await answer).toMatchObject({ kind: 'busy' });
    expect(watcher.waiting).toBe(0);
    expect(watcher.probeArmed).toBe(false);
    const after = web.statements.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(countAfter(web.statements, after, 'probe_statuses')).toBe(0);
  });

  it('rejects bad arguments with InvalidInputError', async () => {
    await expect(web.engine.await('1', { timeout: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(web.engine.await('1', { timeout: 1.5 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(web.engine.await('1', { until: 'soon' as 'terminal' })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(web.engine.await('abc')).rejects.toBeInstanceOf(InvalidInputError);
    await expect(web.engine.await('99999999999999999999')).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });

  it('shutdown mid-wait degrades to a poll loop and still answers the result', async () => {
    const closing = await bootEngine(db, [OrderFsm], {
      name: 'Closing',
      queues: {},
      reaper: false,
      gc: false,
    });
    const id = await worker.engine.insert(OrderFsm);
    await eventually(() => parked(worker.engine, id));
    const answer = closing.engine.await(id, { until: 'terminal', timeout: 20_000 });
    await eventually(async () => closing.engine.runtime.watcher.waiting === 1, 5000, 1);
    await closing.close();
    expect(closing.engine.runtime.watcher.probeArmed).toBe(false);
    await worker.engine.signal({ id }, 'paid', { late: true });
    expect(await answer).toEqual({ kind: 'done', result: { shipped: [{ late: true }] } });
  });

  it('shutdown mid-wait never rejects, even when the pool goes away: busy with the last snapshot', async () => {
    const ownDataSource = new DataSource({ type: 'postgres', url: db.url, poolSize: 2 });
    await ownDataSource.initialize();
    trackResource('await test DataSource', () => ownDataSource.isInitialized);
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: ownDataSource,
          ...FAST,
          name: 'Dying',
          queues: {},
          reaper: false,
          gc: false,
        }),
      ],
      providers: [OrderFsm],
    }).compile();
    await moduleRef.init();
    const engine = moduleRef.get<EngineService>(getEngineToken('Dying'));
    const id = await worker.engine.insert(OrderFsm);
    await eventually(() => parked(worker.engine, id));
    const answer = engine.await(id, { until: 'terminal', timeout: 1500 });
    await eventually(async () => engine.runtime.watcher.waiting === 1, 5000, 1);
    await moduleRef.close();
    await ownDataSource.destroy();
    expect(await answer).toEqual({
      kind: 'busy',
      snapshot: { status: 'awaiting_signal', step: 'ship', attempt: 0 },
    });
  });
});
