import { done, DurableFsm, next, retry, scheduleChildren, Step, type StepContext } from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { bootEngine, eventually, type Harness, rowOf, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Strict order per key (docs/sequences.md) under two schedulers (two engines on one database,
// each with 4 slots): every key's instances live one after another, in id order, while heads
// retry with a backoff; and the sequence key on every insert path.

type OrderState = { key?: string; retried?: boolean; flaky?: boolean };

/** Per instance: when its first step started and its last step ended (a shared counter). */
const firstStart = new Map<string, number>();
const lastEnd = new Map<string, number>();
let tick = 0;

@DurableFsm({ name: 'ordered', queue: 'ord-q' })
class OrderedFsm {
  @Step() async start(ctx: StepContext<OrderState>) {
    if (!firstStart.has(ctx.id)) firstStart.set(ctx.id, ++tick);
    await sleep(1 + (Number(ctx.id) % 3));
    if (ctx.state.flaky && !ctx.state.retried) return retry({ ...ctx.state, retried: true }, 30);
    return next('finish', ctx.state);
  }
  @Step() async finish(ctx: StepContext<OrderState>) {
    await sleep(1);
    // Before its commit: the next instance can be claimed only later.
    lastEnd.set(ctx.id, ++tick);
    return done({});
  }
}

@DurableFsm({ name: 'ordered-parent', queue: 'ord-q' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren(
      'joined',
      [{ fsm: 'quick-seq', sequenceKey: 'child-key', onHeadFailure: 'skip' }],
      ctx.state,
    );
  }
  @Step() joined() {
    return done({});
  }
}

@DurableFsm({ name: 'quick-seq', queue: 'ord-q' })
class QuickFsm {
  @Step() start() {
    return done({});
  }
}

describe('sequence keys under two schedulers, and on every insert path', () => {
  let db: TestDatabase;
  let a: Harness;
  let b: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = { queues: { 'ord-q': 4 }, insertBatcher: { maxDelayMs: 5 } };
    a = await bootEngine(db, [OrderedFsm, ParentFsm, QuickFsm], options);
    b = await bootEngine(db, [OrderedFsm, ParentFsm, QuickFsm], { ...options, name: 'second' });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });

  it('two schedulers run each key one instance at a time, in id order, with retrying heads', async () => {
    const keys = Array.from({ length: 8 }, (_, i) => `ord-${i}`);
    const byKey = new Map<string, string[]>(keys.map((k) => [k, []]));
    for (let round = 0; round < 6; round++) {
      const ids = await a.engine.insertAll(
        OrderedFsm,
        keys.map((k, i) => ({
          sequenceKey: k,
          state: { key: k, flaky: (round + i) % 4 === 0 },
        })),
      );
      keys.forEach((k, i) => byKey.get(k)!.push(ids[i]!));
    }
    const all = [...byKey.values()].flat();
    await eventually(async () => all.every((id) => lastEnd.has(id)), 60_000, 50);
    for (const ids of byKey.values()) {
      for (let i = 1; i < ids.length; i++) {
        // The next instance's first step started after the previous one ended.
        expect(firstStart.get(ids[i]!)!).toBeGreaterThan(lastEnd.get(ids[i - 1]!)!);
      }
    }
  });

  it('every insert path stores the key and its policy', async () => {
    const one = await a.engine.insert(QuickFsm, { sequenceKey: 'p-insert', held: true });
    const [all] = await a.engine.insertAll(QuickFsm, [
      { sequenceKey: 'p-all', onHeadFailure: 'skip', held: true },
    ]);
    await a.engine.insertAsync(QuickFsm, { sequenceKey: 'p-async', held: true });
    const client = new GenDurableClient(db.pool, {
      fsms: { 'quick-seq': { initial: 'start', queue: 'ord-q' } },
    });
    let viaClient: string;
    try {
      viaClient = await client.insert('quick-seq', {
        sequenceKey: 'p-client',
        onHeadFailure: 'skip',
        held: true,
      });
    } finally {
      await client.close();
    }
    const ds = await db.dataSource();
    const inTx = await ds.transaction((manager) =>
      a.engine.insert(QuickFsm, { sequenceKey: 'p-tx', held: true, manager }),
    );
    expect(await rowOf(db, one)).toMatchObject({
      sequence_key: 'p-insert',
      on_head_failure: 'block',
    });
    expect(await rowOf(db, all!)).toMatchObject({ sequence_key: 'p-all', on_head_failure: 'skip' });
    expect(await rowOf(db, viaClient)).toMatchObject({
      sequence_key: 'p-client',
      on_head_failure: 'skip',
    });
    expect(await rowOf(db, inTx)).toMatchObject({ sequence_key: 'p-tx' });
    await eventually(async () => {
      const { rows } = await db.pool.query(
        `SELECT 1 FROM gen_durable WHERE sequence_key = 'p-async' AND on_head_failure = 'block'`,
      );
      return rows.length === 1;
    });
    const parent = await a.engine.insert(ParentFsm, {});
    await a.engine.await(parent, { until: 'terminal', timeout: 20_000 });
    const { rows } = await db.pool.query(
      `SELECT sequence_key, on_head_failure, status FROM gen_durable WHERE parent_id = $1`,
      [parent],
    );
    expect(rows).toEqual([{ sequence_key: 'child-key', on_head_failure: 'skip', status: 'done' }]);
  });
});
