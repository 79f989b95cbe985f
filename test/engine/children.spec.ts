import {
  awaitSignal,
  type ChildView,
  done,
  DurableFsm,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { buildInsertRow } from '../../lib/instance/build-insert-row';
import { INSERT_INSTANCE } from '../../lib/sql/insert.sql';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { flushEntry, submitTogether } from '../support/flush-entries';
import { claimOn, openRawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Child fan-out and join (docs/design.md §10, §6.3 steps 3 and 5, §18, §25 item 8).

const gates = new Map<string, { opened: Promise<void>; open(): void; entered: boolean }>();
function gate(key: string): { opened: Promise<void>; open(): void; entered: boolean } {
  let g = gates.get(key);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    g = { opened, open, entered: false };
    gates.set(key, g);
  }
  return g;
}

type ItemState = { sku: string; fail?: boolean; park?: boolean; gate?: string };

@DurableFsm({ name: 'item' })
class ItemFsm {
  @Step() async start(ctx: StepContext<ItemState>) {
    if (ctx.state.gate) {
      const g = gate(ctx.state.gate);
      g.entered = true;
      await g.opened;
    }
    if (ctx.state.fail) return stop(`item ${ctx.state.sku} is out of stock`);
    if (ctx.state.park) return awaitSignal('release', 'finish', ctx.state);
    return done({ sku: ctx.state.sku });
  }
  @Step() finish(ctx: StepContext<ItemState>) {
    return done({ sku: ctx.state.sku, released: true });
  }
}

type ItemSpec = ItemState & { key?: string };
type BasketState = { rounds: ItemSpec[][] };

const joins = new Map<string, ChildView[][]>();
const toChild = (item: ItemSpec) => ({
  fsm: ItemFsm,
  state: {
    sku: item.sku,
    ...(item.fail ? { fail: true } : {}),
    ...(item.park ? { park: true } : {}),
    ...(item.gate ? { gate: item.gate } : {}),
  },
  ...(item.key ? { correlationKey: item.key } : {}),
});

/** Spawns one round of children per entry of `rounds`, joining after each. */
@DurableFsm({ name: 'basket' })
class BasketFsm {
  @Step() start(ctx: StepContext<BasketState>) {
    const [first = [], ...rest] = ctx.state.rounds;
    return scheduleChildren('joined', first.map(toChild), { rounds: rest });
  }
  @Step() joined(ctx: StepContext<BasketState>) {
    joins.set(ctx.id, [...(joins.get(ctx.id) ?? []), [...ctx.children]]);
    const [nextRound, ...rest] = ctx.state.rounds;
    if (nextRound) return scheduleChildren('joined', nextRound.map(toChild), { rounds: rest });
    return done({
      children: ctx.children.map((c) => ({
        fsm: c.fsm,
        status: c.status,
        result: c.result,
        lastError: c.lastError,
      })),
    });
  }
}

/** A binary tree of depth `depth`: nesting is free. */
@DurableFsm({ name: 'tree' })
class TreeFsm {
  @Step() start(ctx: StepContext<{ depth: number }>) {
    if (ctx.state.depth === 0) return done({ leaves: 1 });
    const child = { fsm: TreeFsm, state: { depth: ctx.state.depth - 1 } };
    return scheduleChildren('joined', [child, child], ctx.state);
  }
  @Step() joined(ctx: StepContext<{ depth: number }>) {
    return done({
      leaves: ctx.children.reduce((n, c) => n + Number((c.result as { leaves: number }).leaves), 0),
    });
  }
}

describe('child fan-out and join (docs/design.md §10)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [ItemFsm, BasketFsm, TreeFsm], {
      queues: { default: 8 },
      gc: { interval: 3_600_000, retention: 1, batch: 1000 },
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const view = (id: string) => t.engine.get({ id });
  const childrenOf = async (id: string) =>
    (
      await db.pool.query<{ id: string; status: string; correlation_key: string | null }>(
        `SELECT id, status, correlation_key FROM gen_durable WHERE parent_id = $1 ORDER BY id`,
        [id],
      )
    ).rows;

  it('full join: the parent runs nextStep once, after every child finished, seeing them all', async () => {
    const id = await t.engine.insert(BasketFsm, {
      state: { rounds: [[{ sku: 'a' }, { sku: 'b' }, { sku: 'c' }]] },
    });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: {
        children: ['a', 'b', 'c'].map((sku) => ({
          fsm: 'item',
          status: 'done',
          result: { sku },
          lastError: null,
        })),
      },
    });
    expect(joins.get(id)).toHaveLength(1);
    expect((await childrenOf(id)).map((c) => c.status)).toEqual(['done', 'done', 'done']);
    expect(await view(id)).toMatchObject({ childrenPending: 0, step: 'joined' });
  });

  it('a failed child releases the barrier: termination, not success', async () => {
    const id = await t.engine.insert(BasketFsm, {
      state: { rounds: [[{ sku: 'ok' }, { sku: 'gone', fail: true }]] },
    });
    const result = await t.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(result).toEqual({
      kind: 'done',
      result: {
        children: [
          { fsm: 'item', status: 'done', result: { sku: 'ok' }, lastError: null },
          { fsm: 'item', status: 'failed', result: null, lastError: 'item gone is out of stock' },
        ],
      },
    });
  });

  it('zero children: the parent goes straight on, in the same flush', async () => {
    t.clear();
    const id = await t.engine.insert(BasketFsm, { state: { rounds: [[]] } });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { children: [] },
    });
    expect(t.statements).toContain('fanout_park_parents');
    expect(t.statements).not.toContain('insert_instances');
    expect(t.statements).not.toContain('insert_unkeyed_instances');
    expect(t.statements).not.toContain('join_parents');
  });

  it('siblings finishing in one flush decrement their parent once, by their count', async () => {
    const keys = ['s1', 's2', 's3'].map((k) => `siblings-${k}`);
    const id = await t.engine.insert(BasketFsm, {
      state: { rounds: [keys.map((k) => ({ sku: k, gate: k }))] },
    });
    await eventually(async () => keys.every((k) => gate(k).entered));
    expect(await view(id)).toMatchObject({ status: 'awaiting_children', childrenPending: 3 });
    t.clear();
    for (const k of keys) gate(k).open();
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    // The three terminal children rode one flush: one join statement decremented by 3.
    expect(t.statements.filter((s) => s === 'join_parents')).toHaveLength(1);
    expect(joins.get(id)).toHaveLength(1);
  });

  it('ctx.children lists every stored child of every round, ordered by id', async () => {
    const id = await t.engine.insert(BasketFsm, {
      state: { rounds: [[{ sku: 'r1-a' }, { sku: 'r1-b' }], [{ sku: 'r2-a' }]] },
    });
    const result = await t.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(result).toMatchObject({ kind: 'done' });
    const rounds = joins.get(id)!;
    expect(rounds.map((r) => r.map((c) => (c.result as { sku: string }).sku))).toEqual([
      ['r1-a', 'r1-b'],
      ['r1-a', 'r1-b', 'r2-a'],
    ]);
    const ids = rounds[1]!.map((c) => BigInt(c.id));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
  });

  it('children duplicated by key drop out of the landed count', async () => {
    const holder = await t.engine.insert(ItemFsm, {
      state: { sku: 'held', park: true },
      correlationKey: 'line:held',
    });
    const id = await t.engine.insert(BasketFsm, {
      state: {
        rounds: [
          [
            { sku: 'x', key: 'line:x', park: true },
            { sku: 'x-again', key: 'line:x', park: true },
            { sku: 'y', key: 'line:y', park: true },
            { sku: 'held-again', key: 'line:held', park: true },
          ],
        ],
      },
    });
    await eventually(async () => (await view(id))?.status === 'awaiting_children');
    expect((await view(id))?.childrenPending).toBe(2);
    const stored = await childrenOf(id);
    expect(stored.map((c) => c.correlation_key)).toEqual(['line:x', 'line:y']);
    for (const child of stored) {
      await eventually(async () => (await view(child.id))?.status === 'awaiting_signal');
      await t.engine.signal({ id: child.id }, 'release');
    }
    const result = await t.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(result).toEqual({
      kind: 'done',
      result: {
        children: [
          { fsm: 'item', status: 'done', result: { sku: 'x', released: true }, lastError: null },
          { fsm: 'item', status: 'done', result: { sku: 'y', released: true }, lastError: null },
        ],
      },
    });
    // Only duplicates: nothing landed, so the parent goes straight on.
    const allDup = await t.engine.insert(BasketFsm, {
      state: { rounds: [[{ sku: 'h', key: 'line:held' }]] },
    });
    expect(await t.engine.await(allDup, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { children: [] },
    });
    await t.engine.signal({ id: holder }, 'release');
  });

  it('nesting works: a tree of depth 3 joins level by level', async () => {
    const id = await t.engine.insert(TreeFsm, { state: { depth: 3 } });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 20_000 })).toEqual({
      kind: 'done',
      result: { leaves: 8 },
    });
    const { rows } = await db.pool.query<{ n: string }>(
      `WITH RECURSIVE d AS (SELECT id FROM gen_durable WHERE id = $1
                            UNION ALL SELECT g.id FROM gen_durable g JOIN d ON g.parent_id = d.id)
       SELECT count(*) AS n FROM d`,
      [id],
    );
    expect(rows[0]!.n).toBe('15');
  });

  it('the reaper skips a parent locked mid-spawn; the spawn then completes intact', async () => {
    const session = await openRawSession(db);
    const blocker = await openRawSession(db);
    try {
      const worker = 'spawn-worker';
      const parent = await t.engine.insert(BasketFsm, { queue: 'spawn', state: { rounds: [] } });
      const control = await t.engine.insert(BasketFsm, { queue: 'spawn', state: { rounds: [] } });
      const claimed = await claimOn(session, 'spawn', worker, { leaseMs: 1500 });
      expect(claimed.map((c) => c.id).sort()).toEqual([parent, control].sort());
      const parentRow = claimed.find((c) => c.id === parent)!;

      // Another transaction holds an uncommitted insert of the key one child will use, so the
      // flush stops inside its child insert: after locking the parent, before parking it.
      const definition = t.engine.runtime.registry.resolve(ItemFsm);
      await blocker.exec('BEGIN');
      await INSERT_INSTANCE.run(
        blocker,
        buildInsertRow(
          definition,
          { correlationKey: 'spawn:contended', state: { sku: 'other' } },
          t.engine.runtime.options,
        ),
      );
      t.clear();
      const reply = submitTogether(t.engine, [
        flushEntry(
          t.engine,
          parentRow,
          scheduleChildren(
            'joined',
            [
              { fsm: ItemFsm, state: { sku: 'p1' } },
              { fsm: ItemFsm, state: { sku: 'p2' }, correlationKey: 'spawn:contended' },
            ],
            {
              rounds: [],
            },
          ),
        ),
      ]);
      await waitUntilBlockedBy(db, blocker.pid);
      expect(t.statements).toEqual(
        expect.arrayContaining(['fanout_lock_parents', 'insert_instances']),
      );

      // Both leases (claimed together) run out while the flush holds the parent's row lock. The
      // engine's own reaper may take the control row first: only the parent's lease is waited on.
      await eventually(
        async () => {
          const { rows } = await db.pool.query(
            `SELECT 1 FROM gen_durable WHERE id = $1 AND lease_expires_at < now()`,
            [parent],
          );
          return rows.length === 1;
        },
        10_000,
        50,
      );
      await t.engine.runtime.reaper!.sweep();
      expect(await view(control)).toMatchObject({ status: 'runnable', attempt: 1, reaps: 1 });
      expect(await view(parent)).toMatchObject({
        status: 'executing',
        attempt: 0,
        reaps: 0,
        lockedBy: worker,
      });

      // The other insert gives way: both children land and the parent parks on them.
      await blocker.exec('ROLLBACK');
      expect(await reply).toEqual(['committed']);
      expect((await childrenOf(parent)).length).toBe(2);

      // The children run on the default queue and release the (never reaped) parent.
      await eventually(async () => (await view(parent))?.status === 'runnable');
      expect(await view(parent)).toMatchObject({
        attempt: 0,
        reaps: 0,
        childrenPending: 0,
        step: 'joined',
      });
      expect((await childrenOf(parent)).map((c) => c.status)).toEqual(['done', 'done']);
    } finally {
      await blocker.close();
      await session.close();
    }
  });

  it('GC spares finished children of a live parent, then collects the whole family', async () => {
    const loner = await t.engine.insert(ItemFsm, { state: { sku: 'loner' } });
    expect(await t.engine.await(loner, { until: 'terminal' })).toMatchObject({ kind: 'done' });
    const id = await t.engine.insert(BasketFsm, {
      state: { rounds: [[{ sku: 'quick' }, { sku: 'slow', park: true }]] },
    });
    await eventually(async () => {
      const kids = await childrenOf(id);
      return (
        kids.length === 2 && kids[0]!.status === 'done' && kids[1]!.status === 'awaiting_signal'
      );
    });
    const [quick, slow] = await childrenOf(id);

    await t.engine.runtime.gc!.sweep();
    expect(await view(loner)).toBeNull();
    expect(await view(quick!.id)).toMatchObject({ status: 'done', parentId: id });

    await t.engine.signal({ id: slow!.id }, 'release');
    expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    await t.engine.runtime.gc!.sweep();
    expect(await view(id)).toBeNull();
    expect(await view(quick!.id)).toBeNull();
    expect(await view(slow!.id)).toBeNull();
  });
});
