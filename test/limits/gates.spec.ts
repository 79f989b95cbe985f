import { awaitSignal, done, DurableFsm, next, Step, type StepContext } from '../../lib';
import {
  bootEngine,
  eventually,
  execute,
  Gates,
  type Harness,
  sleep,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { bucketsOf, sum } from './support/limiter-fixtures';

// Gates (docs/design.md §14, §16.2, §25 item 5) through the engine: at most `limit` holders per key,
// credit to the drawn shard, cold and switched keys admitted by the very next pick, parking
// frees the slot, denied rows released and reported, failures after the claim release the
// batch, and the pick's statement-count contract.
const latches = new Gates();

// Steps inside their body right now, per tag prefix: the physical holders of a gate.
const inside = new Map<string, number>();
const maxInside = new Map<string, number>();
const insideTags = new Set<string>();

@DurableFsm({ name: 'gated', queue: 'gq' })
class GatedFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    const group = ctx.state.tag.split('-')[0]!;
    inside.set(group, (inside.get(group) ?? 0) + 1);
    maxInside.set(group, Math.max(maxInside.get(group) ?? 0, inside.get(group)!));
    insideTags.add(ctx.state.tag);
    try {
      await latches.wait(ctx.state.tag);
    } finally {
      insideTags.delete(ctx.state.tag);
      inside.set(group, inside.get(group)! - 1);
    }
    return done({});
  }
}

@DurableFsm({ name: 'switcher', queue: 'gq' })
class SwitcherFsm {
  @Step() start(ctx: StepContext<{ tag: string; key: string }>) {
    return next('keyed', ctx.state, { concurrencyKey: ctx.state.key });
  }
  @Step() async keyed(ctx: StepContext<{ tag: string }>) {
    await latches.wait(ctx.state.tag);
    return done({});
  }
}

@DurableFsm({ name: 'parker', queue: 'gq' })
class ParkerFsm {
  @Step() start(ctx: StepContext<{ tag: string }>) {
    return awaitSignal('go', 'after', ctx.state);
  }
  @Step() async after(ctx: StepContext<{ tag: string }>) {
    insideTags.add(ctx.state.tag);
    await latches.wait(ctx.state.tag);
    insideTags.delete(ctx.state.tag);
    return done({});
  }
}

const insidePf = new Set<string>();
@DurableFsm({ name: 'prefetched', queue: 'pf' })
class PrefetchedFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    insidePf.add(ctx.state.tag);
    await latches.wait(ctx.state.tag);
    insidePf.delete(ctx.state.tag);
    return done({});
  }
}

@DurableFsm({ name: 'manual', queue: 'manual' })
class ManualFsm {
  @Step() start() {
    return done({});
  }
}

const FSMS = [GatedFsm, SwitcherFsm, ParkerFsm, PrefetchedFsm, ManualFsm];

async function executingTags(db: TestDatabase, key: string): Promise<number> {
  const { rows } = await db.pool.query(
    `SELECT count(*)::int AS n FROM gen_durable WHERE status = 'executing' AND concurrency_key = $1`,
    [key],
  );
  return rows[0].n as number;
}

describe('gates through the engine', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, FSMS, {
      queues: { gq: 10 },
      concurrencyLimits: { api: { limit: 2 }, wide: { limit: 3, shards: 3 }, solo: { limit: 1 } },
      gc: false,
    });
  });
  afterAll(async () => {
    latches.openAll();
    await h.close();
    await db.drop();
  });

  it('never runs more than `limit` holders of a key; denied rows are released and reported', async () => {
    h.clear();
    const ids = await Promise.all(
      [1, 2, 3, 4, 5].map((i) =>
        h.engine.insert(GatedFsm, { state: { tag: `lim-${i}` }, concurrencyKey: ['api', 't1'] }),
      ),
    );
    await eventually(
      async () =>
        (await executingTags(db, 'api:t1')) === 2 &&
        (await bucketsOf(db, 'conc', 'api:t1'))[0]?.available === 0,
      10_000,
    );
    const throttled = await h.waitFor(
      'concurrency:throttled',
      (e) => e.metadata['key'] === 'api:t1',
    );
    expect(throttled.metadata).toEqual({ key: 'api:t1', queue: 'gq' });
    expect(throttled.measurements['admitted']).toBeLessThan(throttled.measurements['wanted']!);
    // The throttled rows went back to runnable (lock, lease and shard cleared, attempt kept).
    // (Polls keep claiming and releasing them; look between two picks.)
    await eventually(
      async () => {
        const { rows: waiting } = await db.pool.query(
          `SELECT status, locked_by, concurrency_shard, attempt FROM gen_durable WHERE id = ANY ($1::bigint[]) AND status <> 'executing'`,
          [ids],
        );
        return (
          waiting.length === 3 &&
          waiting.every(
            (r) =>
              r.status === 'runnable' &&
              r.locked_by === null &&
              r.concurrency_shard === null &&
              r.attempt === 0,
          )
        );
      },
      10_000,
      5,
    );

    // Release the holders one at a time; each freed slot admits the next row.
    for (let i = 1; i <= 5; i++) {
      await eventually(async () => (inside.get('lim') ?? 0) === Math.min(2, 6 - i), 10_000);
      latches.open([...insideTags].find((tag) => tag.startsWith('lim-'))!);
      await sleep(50);
    }
    await eventually(async () => {
      const results = await Promise.all(ids.map((id) => h.engine.get({ id })));
      return results.every((r) => r?.status === 'done');
    }, 15_000);
    // Never more than `limit` steps of the key inside their body at once.
    expect(maxInside.get('lim')).toBe(2);
    // Counters are exact after the drain: every debit was credited.
    await eventually(
      async () => (await bucketsOf(db, 'conc', 'api:t1'))[0]?.available === 2,
      5_000,
    );
  });

  it('admits a switched-to key at the very next pick and credits the slot after the outcome', async () => {
    const id = await h.engine.insert(SwitcherFsm, { state: { tag: 'sw-1', key: 'solo:x' } });
    await latches.reached('sw-1');
    expect(await bucketsOf(db, 'conc', 'solo:x')).toMatchObject([{ capacity: 1, available: 0 }]);
    expect(await h.engine.get({ id })).toMatchObject({
      concurrencyKey: 'solo:x',
      concurrencyShard: 0,
      step: 'keyed',
    });
    latches.open('sw-1');
    await h.engine.await(id, { timeout: 10_000 });
    await eventually(
      async () => (await bucketsOf(db, 'conc', 'solo:x'))[0]?.available === 1,
      5_000,
    );
  });

  it('parking releases the slot; a sibling runs while the holder waits', async () => {
    const parked = await h.engine.insert(ParkerFsm, {
      state: { tag: 'park-a' },
      concurrencyKey: 'solo:p',
    });
    await eventually(
      async () => (await h.engine.get({ id: parked }))?.status === 'awaiting_signal',
    );
    await eventually(
      async () => (await bucketsOf(db, 'conc', 'solo:p'))[0]?.available === 1,
      5_000,
    );
    const sibling = await h.engine.insert(GatedFsm, {
      state: { tag: 'park-b' },
      concurrencyKey: 'solo:p',
    });
    await latches.reached('park-b');
    // The woken holder now waits for the sibling's slot.
    h.clear();
    await h.engine.signal({ id: parked }, 'go');
    await h.waitFor('concurrency:throttled', (e) => e.metadata['key'] === 'solo:p');
    await sleep(200);
    expect(insideTags.has('park-a')).toBe(false);
    latches.open('park-b');
    await h.engine.await(sibling, { timeout: 10_000 });
    await latches.reached('park-a');
    latches.open('park-a');
    expect(await h.engine.await(parked, { timeout: 10_000 })).toMatchObject({ kind: 'done' });
  });
});

describe('a gated pick, step by step', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    // No scheduler serves 'manual': the test drives the production picker and executor.
    h = await bootEngine(db, FSMS, {
      queues: {},
      reaper: false,
      concurrencyLimits: { wide: { limit: 3, shards: 3 }, pair: { limit: 2 } },
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('claim (enrichment included) + admit (+ release when denied): the statement-count contract', async () => {
    await h.engine.insertAll(
      ManualFsm,
      [1, 2, 3].map(() => ({ concurrencyKey: 'pair:c' })),
    );
    h.clear();
    const rows = await h.engine.runtime.picker.pick('manual', 10, 'counts-worker');
    expect(rows).toHaveLength(2);
    expect(h.statements).toEqual(['claim_runnable', 'admit', 'release_claims']);
    for (const row of rows) await execute(h.engine, row);
    await eventually(
      async () => (await bucketsOf(db, 'conc', 'pair:c'))[0]?.available === 2,
      5_000,
    );

    h.clear();
    const last = await h.engine.runtime.picker.pick('manual', 10, 'counts-worker');
    expect(last).toHaveLength(1);
    expect(h.statements).toEqual(['claim_runnable', 'admit']);
    await execute(h.engine, last[0]!);

    // An unlimited pick never asks the limiter.
    await h.engine.insert(ManualFsm);
    h.clear();
    const plain = await h.engine.runtime.picker.pick('manual', 10, 'counts-worker');
    expect(h.statements).toEqual(['claim_runnable']);
    await execute(h.engine, plain[0]!);

    // Everything denied: claim + admit + release, no enrichment.
    await h.engine.insertAll(
      ManualFsm,
      [1, 2, 3].map(() => ({ concurrencyKey: 'pair:d' })),
    );
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available) VALUES ('conc', 'pair:d', 0, 2, 0)`,
    );
    h.clear();
    expect(await h.engine.runtime.picker.pick('manual', 10, 'counts-worker')).toEqual([]);
    expect(h.statements).toEqual(['claim_runnable', 'admit', 'release_claims']);
    await db.pool.query(`DELETE FROM gen_durable WHERE concurrency_key = 'pair:d'`);
  });

  it('credits the drawn shard after the outcome commits', async () => {
    await h.engine.insertAll(
      ManualFsm,
      [1, 2, 3].map(() => ({ concurrencyKey: 'wide:s' })),
    );
    const rows = await h.engine.runtime.picker.pick('manual', 10, 'shard-worker');
    expect(rows.map((r) => r.slot?.shard).sort()).toEqual([0, 1, 2]);
    const { rows: stamped } = await db.pool.query(
      `SELECT id, concurrency_shard FROM gen_durable WHERE concurrency_key = 'wide:s' ORDER BY id`,
    );
    expect(stamped.map((r) => r.concurrency_shard).sort()).toEqual([0, 1, 2]);
    const onShard1 = rows.find((r) => r.slot?.shard === 1)!;
    expect(await execute(h.engine, onShard1)).toBe('committed');
    await eventually(
      async () =>
        (await bucketsOf(db, 'conc', 'wide:s')).map((b) => b.available).join() === '0,1,0',
      5_000,
    );
    for (const row of rows.filter((r) => r !== onShard1)) await execute(h.engine, row);
    await eventually(
      async () => sum((await bucketsOf(db, 'conc', 'wide:s')).map((b) => b.available)) === 3,
      5_000,
    );
  });

  it('a failure after the claim releases the whole batch and credits admitted slots', async () => {
    await h.engine.insertAll(
      ManualFsm,
      [1, 2].map(() => ({ concurrencyKey: 'pair:f' })),
    );
    const picker = h.engine.runtime.picker;
    // Admission succeeds (slots drawn), then the pick fails: the last thing after the claim.
    const admitRows = picker.admit.bind(picker);
    picker.admit = async (...args: Parameters<typeof picker.admit>) => {
      await admitRows(...args);
      throw new Error('after admission failed');
    };
    try {
      await expect(picker.pick('manual', 10, 'failing-worker')).rejects.toThrow(
        'after admission failed',
      );
    } finally {
      picker.admit = admitRows;
    }
    const { rows } = await db.pool.query(
      `SELECT status, locked_by, concurrency_shard FROM gen_durable WHERE concurrency_key = 'pair:f'`,
    );
    expect(rows).toEqual([
      { status: 'runnable', locked_by: null, concurrency_shard: null },
      { status: 'runnable', locked_by: null, concurrency_shard: null },
    ]);
    expect(await bucketsOf(db, 'conc', 'pair:f')).toMatchObject([{ capacity: 2, available: 2 }]);

    // The limiter itself failing: nothing was debited, the batch goes back all the same.
    const limiter = h.engine.runtime.limiter;
    const admit = limiter.admit.bind(limiter);
    limiter.admit = () => Promise.reject(new Error('limiter down'));
    try {
      await expect(picker.pick('manual', 10, 'failing-worker')).rejects.toThrow('limiter down');
    } finally {
      limiter.admit = admit;
    }
    const { rows: again } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE concurrency_key = 'pair:f' AND status = 'runnable'`,
    );
    expect(again[0].n).toBe(2);
    await db.pool.query(`DELETE FROM gen_durable WHERE concurrency_key = 'pair:f'`);
  });

  it('prefetched rows hold admitted slots; the shutdown drain releases them and credits the slots', async () => {
    const p = await bootEngine(db, FSMS, {
      name: 'Prefetching',
      queues: { pf: 1 },
      prefetch: 2,
      concurrencyLimits: { pf3: { limit: 3 } },
      reaper: false,
      gc: false,
      drainTimeout: 10_000,
    });
    let closed = false;
    try {
      const ids = await p.engine.insertAll(
        PrefetchedFsm,
        [1, 2, 3].map((i) => ({ state: { tag: `pf-${i}` }, concurrencyKey: 'pf3:k' })),
      );
      // One runs, two wait in the buffer, all three hold a slot.
      await eventually(
        async () =>
          insidePf.size === 1 && (await bucketsOf(db, 'conc', 'pf3:k'))[0]?.available === 0,
        10_000,
      );
      p.clear();
      const closing = p.close().then(() => (closed = true));
      const drained = await p.waitFor('scheduler:drain');
      expect(drained.measurements).toEqual({ released: 2, inFlight: 1 });
      latches.open([...insidePf][0]!);
      await closing;
      const { rows } = await db.pool.query(
        `SELECT status FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY status`,
        [ids],
      );
      expect(rows.map((r) => r.status)).toEqual(['runnable', 'runnable', 'done']);
      await eventually(
        async () => (await bucketsOf(db, 'conc', 'pf3:k'))[0]?.available === 3,
        5_000,
      );
    } finally {
      if (!closed) await p.close();
    }
  });
});
