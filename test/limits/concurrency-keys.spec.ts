import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, Gates, type Harness, sleep } from '../support/engine-harness';
import { claimOn, openRawSession, waitUntilBlockedBy } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// K = 1 concurrency keys (docs/design.md §5.3, §14, §25 item 4) on real PostgreSQL: the claim is the
// lock. One per key per batch, blocked siblings skipped before the LIMIT, NULL keys never
// deduplicated, a cross-node race settled by the arbiter index and retried, no overlap and no
// lost update under concurrent schedulers, distinct keys in parallel, a rate-limit name prefix
// still exclusive, and next() keeping, releasing or switching the key.
const latches = new Gates();

@DurableFsm({ name: 'plain', queue: 'kq' })
class PlainFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'overlap', queue: 'ov' })
class OverlapFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    await latches.wait(ctx.state.tag);
    return done({});
  }
}

// Read-modify-write on a shared counter with a pause in between: any overlap loses an update.
let pool: TestDatabase['pool'] | undefined;
let active = 0;
let maxActive = 0;
@DurableFsm({ name: 'counter', queue: 'lu' })
class CounterFsm {
  @Step() async start() {
    active += 1;
    maxActive = Math.max(maxActive, active);
    try {
      const { rows } = await pool!.query<{ n: number }>('SELECT n FROM k1_counter WHERE id = 1');
      await sleep(5);
      await pool!.query('UPDATE k1_counter SET n = $1 WHERE id = 1', [rows[0]!.n + 1]);
    } finally {
      active -= 1;
    }
    return done({});
  }
}

const seenKeys = new Map<string, (string | null)[]>();
@DurableFsm({ name: 'keyed', queue: 'kf' })
class KeyedFsm {
  private async record(ctx: StepContext<unknown>): Promise<void> {
    const { rows } = await pool!.query<{ concurrency_key: string | null }>(
      'SELECT concurrency_key FROM gen_durable WHERE id = $1',
      [ctx.id],
    );
    seenKeys.set(ctx.id, [...(seenKeys.get(ctx.id) ?? []), rows[0]!.concurrency_key]);
  }
  @Step() async start(ctx: StepContext<Record<string, never>>) {
    await this.record(ctx);
    return next('kept', {});
  }
  @Step() async kept(ctx: StepContext<Record<string, never>>) {
    await this.record(ctx);
    return next('released', {}, { concurrencyKey: null });
  }
  @Step() async released(ctx: StepContext<Record<string, never>>) {
    await this.record(ctx);
    return next('switched', {}, { concurrencyKey: ['acct', 42] });
  }
  @Step() async switched(ctx: StepContext<Record<string, never>>) {
    await this.record(ctx);
    return done({});
  }
}

const FSMS = [PlainFsm, OverlapFsm, CounterFsm, KeyedFsm];

async function statusOf(db: TestDatabase, ids: readonly string[]): Promise<Record<string, string>> {
  const { rows } = await db.pool.query(
    `SELECT id, status FROM gen_durable WHERE id = ANY ($1::bigint[])`,
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.id as string, r.status as string]));
}

describe('K = 1 concurrency keys', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    pool = db.pool;
    await db.pool.query('CREATE TABLE k1_counter (id int PRIMARY KEY, n int NOT NULL)');
    await db.pool.query('INSERT INTO k1_counter VALUES (1, 0)');
    h = await bootEngine(db, FSMS, {
      queues: { ov: 4, kf: 2 },
      rateLimits: { stripe: { allowed: 100, period: 1 } },
      gc: false,
    });
  });
  afterAll(async () => {
    latches.openAll();
    await h.close();
    await db.drop();
  });

  it('claims one row per key per batch; NULL keys are never deduplicated; losers stay runnable', async () => {
    const a = await h.engine.insertAll(
      PlainFsm,
      [1, 2, 3].map(() => ({ concurrencyKey: 'k:a' })),
    );
    const b = await h.engine.insertAll(
      PlainFsm,
      [1, 2].map(() => ({ concurrencyKey: ['k', 'b'] as const })),
    );
    const free = await h.engine.insertAll(PlainFsm, [{}, {}, {}]);
    const rows = await h.engine.runtime.picker.pick('kq', 20, 'k1-worker');
    const keys = rows.map((r) => r.concurrencyKey);
    expect(keys.filter((k) => k === 'k:a')).toHaveLength(1);
    expect(keys.filter((k) => k === 'k:b')).toHaveLength(1);
    expect(keys.filter((k) => k === null)).toHaveLength(3);
    expect(rows.every((r) => r.concurrencyShard === null && !r.gated)).toBe(true);
    const status = await statusOf(db, [...a, ...b, ...free]);
    expect(Object.values(status).filter((s) => s === 'runnable')).toHaveLength(3);

    // Blocked siblings are skipped before the LIMIT: a batch of 2 still finds the free rows behind them.
    const more = await h.engine.insertAll(PlainFsm, [{}, {}]);
    const next2 = await h.engine.runtime.picker.pick('kq', 2, 'k1-worker');
    expect(next2.map((r) => r.id).sort()).toEqual([...more].sort());
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', locked_by = NULL WHERE queue = 'kq'`,
    );
  });

  it('a rate-limit name prefix stays K = 1 (not a gate)', async () => {
    const ids = await h.engine.insertAll(
      PlainFsm,
      [1, 2].map(() => ({ concurrencyKey: 'stripe:cus_1' })),
    );
    const rows = await h.engine.runtime.picker.pick('kq', 10, 'k1-worker');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      concurrencyKey: 'stripe:cus_1',
      concurrencyShard: null,
      gated: false,
    });
    expect(await h.engine.runtime.picker.pick('kq', 10, 'k1-worker')).toEqual([]);
    // Two executing NULL-shard rows of one key are uncommittable.
    const other = ids.find((id) => id !== rows[0]!.id)!;
    await expect(
      db.pool.query(`UPDATE gen_durable SET status = 'executing' WHERE id = $1`, [other]),
    ).rejects.toMatchObject({
      constraint: 'gen_durable_concurrency_active',
    });
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', locked_by = NULL WHERE queue = 'kq'`,
    );
  });

  it('a cross-node race on one key aborts the losing claim at the arbiter; it is retried (concurrency:contended)', async () => {
    const ids = await h.engine.insertAll(
      PlainFsm,
      [1, 2].map(() => ({ concurrencyKey: 'k:race' })),
    );
    const other = await openRawSession(db);
    try {
      await other.exec('BEGIN');
      // Node A claims the head row and has not committed yet.
      const claimedByA = await claimOn(other, 'kq', 'node-a', { batch: 1 });
      expect(claimedByA).toHaveLength(1);
      h.clear();
      // Node B skips A's locked row, sees no committed holder and claims the sibling: its
      // arbiter entry waits on A's...
      const picking = h.engine.runtime.picker.pick('kq', 10, 'node-b');
      await waitUntilBlockedBy(db, other.pid);
      await other.exec('COMMIT');
      // ...and is refused once A commits; the retry sees A's holder and skips the key.
      expect(await picking).toEqual([]);
    } finally {
      await other.close();
    }
    expect(h.eventsOf('concurrency:contended')).toEqual([
      expect.objectContaining({ measurements: { count: 1 }, metadata: { queue: 'kq' } }),
    ]);
    const status = await statusOf(db, ids);
    expect(Object.values(status).sort()).toEqual(['executing', 'runnable']);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', locked_by = NULL WHERE queue = 'kq'`,
    );
  });

  it('distinct keys run in parallel', async () => {
    await h.engine.insert(OverlapFsm, { state: { tag: 'ov-a' }, concurrencyKey: 'ov:a' });
    await h.engine.insert(OverlapFsm, { state: { tag: 'ov-b' }, concurrencyKey: 'ov:b' });
    await h.engine.insert(OverlapFsm, { state: { tag: 'ov-a2' }, concurrencyKey: 'ov:a' });
    // Both keys' first rows are inside their step at the same time...
    await Promise.all([latches.reached('ov-a'), latches.reached('ov-b')]);
    // ...while the second row of ov:a waits for its key.
    await sleep(200);
    const { rows } = await db.pool.query(
      `SELECT status FROM gen_durable WHERE state->>'tag' = 'ov-a2'`,
    );
    expect(rows[0].status).toBe('runnable');
    latches.open('ov-a');
    await latches.reached('ov-a2');
    latches.open('ov-b');
    latches.open('ov-a2');
  });

  it('next() keeps the key (absent), releases it (null) and switches it', async () => {
    const id = await h.engine.insert(KeyedFsm, { concurrencyKey: 'acct:7' });
    expect(await h.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'done' });
    expect(seenKeys.get(id)).toEqual(['acct:7', 'acct:7', null, 'acct:42']);
  });

  it('no overlap and no lost update with two engines racing one key', async () => {
    const second = await bootEngine(db, FSMS, {
      name: 'Second',
      queues: { lu: 5 },
      gc: false,
      reaper: false,
    });
    const first = await bootEngine(db, FSMS, {
      name: 'Third',
      queues: { lu: 5 },
      gc: false,
      reaper: false,
    });
    try {
      const ids = await h.engine.insertAll(
        CounterFsm,
        Array.from({ length: 20 }, () => ({ concurrencyKey: 'lu:counter' })),
      );
      await eventually(
        async () => Object.values(await statusOf(db, ids)).every((s) => s === 'done'),
        30_000,
      );
    } finally {
      await second.close();
      await first.close();
    }
    const { rows } = await db.pool.query('SELECT n FROM k1_counter WHERE id = 1');
    expect(rows[0].n).toBe(20);
    expect(maxActive).toBe(1);
  });
});
