import {
  awaitSignal,
  type ChildView,
  done,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Cancel of rows that are not executing (docs/design.md §27.1–27.2): one statement with its
// riders, the terminal status everywhere done/failed are, typed errors for bad input.

@DurableFsm({ name: 'waiter' })
class WaiterFsm {
  @Step() start(ctx: StepContext<{ n?: number }>) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish() {
    return done({ finished: true });
  }
}

@DurableFsm({ name: 'abortable', cancelOn: ['abort'] })
class AbortableFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish() {
    return done({});
  }
}

const joins = new Map<string, readonly ChildView[]>();

@DurableFsm({ name: 'fanner' })
class FannerFsm {
  @Step() start(ctx: StepContext<{ children: number }>) {
    return scheduleChildren(
      'joined',
      Array.from({ length: ctx.state.children }, (_, n) => ({ fsm: WaiterFsm, state: { n } })),
      ctx.state,
    );
  }
  @Step() joined(ctx: StepContext<{ children: number }>) {
    joins.set(ctx.id, ctx.children);
    return done({ joined: ctx.children.length });
  }
}

describe('cancel of rows that are not executing (docs/design.md §27.2)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [WaiterFsm, FannerFsm, AbortableFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    gd = GenDurableTesting.forEngine(h.engine);
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });
  beforeEach(() => gd.reset());

  const childrenOf = async (parent: string) =>
    (
      await db.pool.query<{ id: string; status: string; parent_id: string | null }>(
        `SELECT id, status, parent_id FROM gen_durable WHERE parent_id = $1 ORDER BY id`,
        [parent],
      )
    ).rows;

  it('cancels a runnable row in one statement; await, get and assertCancelled see it', async () => {
    const id = await h.engine.insert(WaiterFsm, { correlationKey: 'w:1' });
    const waiting = h.engine.await(id, { timeout: 10_000, until: 'terminal' });
    h.clear();
    const result = await h.engine.cancel(id, { reason: 'operator said so' });
    // The waiter's own probes and re-read aside (test/engine/statement-counts.spec.ts counts alone).
    const waiterReads = new Set(['probe_statuses', 'get_instance_by_id']);
    expect(h.statements.filter((s) => !waiterReads.has(s))).toEqual(['cancel_instances']);
    expect(result).toEqual({ cancelled: [id], requested: [], alreadyTerminal: [] });
    expect(await waiting).toEqual({ kind: 'cancelled', reason: 'operator said so' });
    await gd.assertCancelled(id, 'operator said so');
    await gd.assertCancelled({ id }, /operator/);
    const view = await h.engine.get(id);
    expect(view).toMatchObject({ status: 'cancelled', cancelReason: 'operator said so' });
    expect(view?.cancelRequestedAt).toBeInstanceOf(Date);
    // The default scope frees the key: a new instance may take it; until then a read by key
    // finds the cancelled one (docs/identity.md "Finding an instance by key").
    expect((await h.engine.get({ correlationKey: 'w:1' }))?.status).toBe('cancelled');
    await expect(h.engine.insert(WaiterFsm, { correlationKey: 'w:1' })).resolves.toMatch(/^\d+$/);
    // Nothing runs it any more; signals find no target.
    expect(await gd.drain()).toMatchObject({ steps: 1 });
    await gd.assertCancelled(id);
    await expect(h.engine.signal(id, 'go')).rejects.toThrow(NoTargetError);
  });

  it('cancels a scheduled row and a parked row, consuming the parked row inbox', async () => {
    const later = await h.engine.insert(WaiterFsm, { scheduleIn: 3_600_000 });
    const parked = await h.engine.insert(WaiterFsm, {});
    await gd.drain({ withScheduled: false });
    await gd.assertAwaiting(parked, 'go');
    await h.engine.signal(parked, 'other', { x: 1 });
    expect((await h.engine.cancel(later)).cancelled).toEqual([later]);
    expect((await h.engine.cancel(parked)).cancelled).toEqual([parked]);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NULL`,
      [parked],
    );
    expect(rows[0].n).toBe(0);
    expect(await rowOf(db, parked)).toMatchObject({ status: 'cancelled', await_deadline: null });
    await gd.assertCancelled(later);
  });

  it('is idempotent: an ended row is answered in alreadyTerminal and left unchanged', async () => {
    const id = await h.engine.insert(WaiterFsm, {});
    await h.engine.cancel(id, { reason: 'first' });
    const before = await rowOf(db, id);
    expect(await h.engine.cancel(id, { reason: 'second' })).toEqual({
      cancelled: [],
      requested: [],
      alreadyTerminal: [id],
    });
    expect(await rowOf(db, id)).toEqual(before);
    await gd.assertCancelled(id, 'first');

    const finished = await h.engine.insert(WaiterFsm, {});
    await gd.drain();
    await h.engine.signal(finished, 'go');
    await gd.drain();
    await gd.assertDone(finished);
    const doneBefore = await rowOf(db, finished);
    expect((await h.engine.cancel(finished)).alreadyTerminal).toEqual([finished]);
    expect(await rowOf(db, finished)).toEqual(doneBefore);
  });

  it('answers a missing target with NoTargetError and bad options with InvalidInputError', async () => {
    await expect(h.engine.cancel('999999999')).rejects.toThrow(NoTargetError);
    await expect(h.engine.cancel({ correlationKey: 'nobody' })).rejects.toThrow(
      /no instance for correlation key "nobody": nothing was cancelled/,
    );
    const id = await h.engine.insert(WaiterFsm, {});
    const before = await rowOf(db, id);
    const bad: unknown[] = [
      { children: 'all' },
      { mode: 'kill' },
      { reason: 42 },
      { reason: 'x'.repeat(9000) },
      { force: true },
      'cascade',
    ];
    for (const options of bad) {
      await expect(h.engine.cancel(id, options as never)).rejects.toThrow(InvalidInputError);
    }
    await expect(h.engine.cancel({ nope: 1 } as never)).rejects.toThrow(InvalidInputError);
    expect(await rowOf(db, id)).toEqual(before);
  });

  it('a cancelled child decrements its parent join; the last one wakes the parent (keep)', async () => {
    const parent = await h.engine.insert(FannerFsm, { state: { children: 2 } });
    await gd.drain();
    await gd.assertStatus(parent, 'awaiting_children');
    const [a, b] = (await childrenOf(parent)).map((c) => c.id);
    expect((await rowOf(db, parent))['children_pending']).toBe(2);
    await h.engine.cancel(a!, { children: 'keep' });
    expect(await rowOf(db, parent)).toMatchObject({
      status: 'awaiting_children',
      children_pending: 1,
    });
    await h.engine.cancel(b!);
    expect(await rowOf(db, parent)).toMatchObject({ status: 'runnable', children_pending: 0 });
    await gd.drain();
    await gd.assertDone(parent, { joined: 2 });
    expect(joins.get(parent)?.map((c) => c.status)).toEqual(['cancelled', 'cancelled']);
  });

  it('cascade cancels every live descendant; detach unlinks; keep leaves them', async () => {
    const cascade = await h.engine.insert(FannerFsm, { state: { children: 3 } });
    const detach = await h.engine.insert(FannerFsm, { state: { children: 2 } });
    const keep = await h.engine.insert(FannerFsm, { state: { children: 2 } });
    await gd.drain();
    const cascaded = await childrenOf(cascade);
    const detached = await childrenOf(detach);
    const kept = await childrenOf(keep);
    // One child of the cascade tree already ended: it is not reported.
    await h.engine.signal(cascaded[0]!.id, 'go');
    await gd.drain();
    await gd.assertDone(cascaded[0]!.id);

    const c = await h.engine.cancel(cascade, { reason: 'tree' });
    expect(c.cancelled.sort()).toEqual([cascade, cascaded[1]!.id, cascaded[2]!.id].sort());
    for (const child of cascaded.slice(1)) await gd.assertCancelled(child.id, 'tree');

    const d = await h.engine.cancel(detach, { children: 'detach' });
    expect(d.cancelled).toEqual([detach]);
    for (const child of detached) {
      expect(await rowOf(db, child.id)).toMatchObject({
        status: 'awaiting_signal',
        parent_id: null,
      });
    }

    const k = await h.engine.cancel(keep, { children: 'keep' });
    expect(k.cancelled).toEqual([keep]);
    for (const child of kept) {
      expect(await rowOf(db, child.id)).toMatchObject({
        status: 'awaiting_signal',
        parent_id: keep,
      });
    }
    // A kept child that ends later joins its cancelled parent harmlessly.
    await h.engine.signal(kept[0]!.id, 'go');
    await gd.drain();
    await gd.assertDone(kept[0]!.id);
    await gd.assertCancelled(keep);
  });

  it('cancelOn: a delivery of such a name cancels the instance in one statement, storing nothing', async () => {
    const id = await h.engine.insert(AbortableFsm, { correlationKey: 'abortable:1' });
    await gd.drain();
    h.clear();
    await h.engine.signal({ correlationKey: 'abortable:1' }, 'abort', { why: 'fraud' });
    expect(h.statements).toEqual(['cancel_instances']);
    await gd.assertCancelled(id, 'signal abort');
    const { rows } = await db.pool.query(
      `SELECT id FROM gen_durable_signals WHERE target_id = $1`,
      [id],
    );
    expect(rows).toEqual([]);
    // Ended: a second one finds no live target, as any signal to an ended instance.
    await expect(h.engine.signal(id, 'abort')).rejects.toThrow(NoTargetError);
    // Another FSM gets `abort` as an ordinary signal.
    const other = await h.engine.insert(WaiterFsm, {});
    await h.engine.signal(other, 'abort');
    const { rows: stored } = await db.pool.query(
      `SELECT name FROM gen_durable_signals WHERE target_id = $1`,
      [other],
    );
    expect(stored).toEqual([{ name: 'abort' }]);
    expect((await rowOf(db, other))['status']).toBe('runnable');
  });

  it('the drain tally counts nothing for rows cancelled before they ran', async () => {
    const id = await h.engine.insert(WaiterFsm, {});
    await h.engine.cancel(id);
    expect(await gd.drain()).toMatchObject({ steps: 0, cancelled: 0 });
  });
});

describe('GC collects cancelled rows (docs/design.md §18.1, §27.1)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [WaiterFsm], {
      queues: {},
      reaper: false,
      gc: { interval: 3_600_000, retention: 1, cancelledRetention: 1 },
      poke: 'none',
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('deletes a cancelled row past retention, with its inbox', async () => {
    const id = await h.engine.insert(WaiterFsm, {});
    await h.engine.signal(id, 'early');
    await h.engine.cancel(id);
    await db.pool.query(
      `UPDATE gen_durable SET updated_at = now() - interval '1 minute' WHERE id = $1`,
      [id],
    );
    expect(await h.engine.runtime.gc?.sweep()).toBe(1);
    expect(await h.engine.get(id)).toBeNull();
    expect(await h.engine.await(id, { timeout: 0 })).toEqual({ kind: 'not_found' });
  });
});
