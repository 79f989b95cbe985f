import { DurableFsm, done, Step } from '../../lib';
import { PostgresLimiter } from '../../lib/limiter/postgres.limiter';
import { bootEngine } from '../support/engine-harness';
import { openRawSession } from '../support/raw-session';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  bucketsOf,
  entriesOf,
  executorOf,
  gate,
  insertExecuting,
  rate,
  recordedTelemetry,
} from './support/limiter-fixtures';

// GC steps 2–3 (docs/design.md §18, §25 item 5): rate buckets pruned (idle and refilled, or config
// gone; all shards of a key or none), gate counters reconciled from the executing truth
// (leaked slots healed, orphans swept, idle keys dropped, missing shards backfilled).
describe('GC: bucket pruning and gate reconcile', () => {
  let db: TestDatabase;
  let limiter: PostgresLimiter;
  const t = recordedTelemetry();

  beforeAll(async () => {
    db = await createTestDatabase();
    // A short settle window keeps the file fast; the race test below uses a longer one.
    limiter = new PostgresLimiter(executorOf(db).sql, t.telemetry, 50);
    await limiter.syncConfig([
      gate('leak', 3),
      gate('gone', 2),
      gate('shrink', 3, 3),
      gate('grow', 4),
      gate('idle', 2),
      rate('idler', 10, 1),
      rate('busy', 1, 3600),
      rate('dropped', 5, 1),
    ]);
  });
  afterAll(async () => {
    t.close();
    await db.drop();
  });

  /** Admits `n` fresh executing rows of `key`; returns their ids. */
  async function hold(key: string, n: number): Promise<string[]> {
    const ids = await insertExecuting(db, n, { gateKey: key });
    const r = await limiter.admit(entriesOf(ids, { gateKey: key }), 'gc');
    expect(r.admitted).toHaveLength(n);
    return ids;
  }

  /** The reaper's effect on a crashed holder: back to runnable, no credit. */
  async function crash(id: string): Promise<void> {
    await db.pool.query(
      `UPDATE gen_durable SET status = 'runnable', locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL WHERE id = $1`,
      [id],
    );
  }

  it('a leaked slot is healed by the next reconcile', async () => {
    const ids = await hold('leak:a', 2);
    await crash(ids[0]!);
    expect(await bucketsOf(db, 'conc', 'leak:a')).toMatchObject([{ capacity: 3, available: 1 }]);
    const result = await limiter.reconcile();
    expect(result.gates).toBeGreaterThanOrEqual(1);
    // One holder left: 3 − 1.
    expect(await bucketsOf(db, 'conc', 'leak:a')).toMatchObject([{ capacity: 3, available: 2 }]);
    // Idempotent: nothing more to change for this key.
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'leak:a')).toMatchObject([{ capacity: 3, available: 2 }]);
  });

  it('never double-credits: a credit still in flight during the reconcile is not repaired as a leak', async () => {
    const slow = new PostgresLimiter(executorOf(db).sql, t.telemetry, 400);
    const [leaked, finishing, running] = await hold('leak:race', 3);
    await crash(leaked!); // a real leak: no holder, never credited
    const reconciling = slow.reconcile();
    await new Promise((r) => setTimeout(r, 150)); // the reconcile has seen its deficits
    // Another holder's outcome commits (shard cleared); its credit is still on its way.
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', locked_by = NULL, concurrency_shard = NULL WHERE id = $1`,
      [finishing],
    );
    await reconciling;
    // Only the leak was repaired...
    expect(await bucketsOf(db, 'conc', 'leak:race')).toMatchObject([{ available: 1 }]);
    // ...so when the credit lands the counter matches the truth: one holder left of 3.
    await slow.credit([{ key: 'leak:race', shard: 0, id: finishing! }]);
    expect(await bucketsOf(db, 'conc', 'leak:race')).toMatchObject([{ capacity: 3, available: 2 }]);
    expect(running).toBeDefined();
  });

  it('drops whole idle keys (no holders, every shard lockable): the next admit mints them cold', async () => {
    const ids = await hold('idle:a', 2);
    for (const id of ids) await crash(id);
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'idle:a')).toEqual([]);
    // A key with one shard locked elsewhere is never dropped, and its locked shard is untouched.
    const held = await hold('idle:b', 1);
    await crash(held[0]!);
    const other = await openRawSession(db);
    try {
      await other.exec('BEGIN');
      await other.exec(
        `SELECT 1 FROM gen_durable_buckets WHERE kind = 'conc' AND key = 'idle:b' FOR UPDATE`,
      );
      await limiter.reconcile();
      expect(await bucketsOf(db, 'conc', 'idle:b')).toMatchObject([{ available: 1 }]);
      await other.exec('COMMIT');
    } finally {
      await other.close();
    }
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'idle:b')).toEqual([]);
  });

  it('sweeps orphan shards (config gone, or shard ≥ shards) that have no holders', async () => {
    const goneHolder = await hold('gone:a', 1);
    await hold('gone:b', 1).then((ids) => crash(ids[0]!));
    await db.pool.query(
      `DELETE FROM gen_durable_bucket_configs WHERE kind = 'conc' AND name = 'gone'`,
    );
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'gone:b')).toEqual([]);
    // A shard with a holder stays (its credit is still due).
    expect(await bucketsOf(db, 'conc', 'gone:a')).toMatchObject([{ shard: 0, available: 1 }]);
    await crash(goneHolder[0]!);
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'gone:a')).toEqual([]);

    // shrink: limit 3 over 3 shards, then over 1. Shard 2 keeps its holder, shard 1 goes.
    const ids = await hold('shrink:a', 3);
    const { rows } = await db.pool.query(
      `SELECT id, concurrency_shard FROM gen_durable WHERE id = ANY ($1::bigint[])`,
      [ids],
    );
    const onShard = (s: number) => rows.find((r) => r.concurrency_shard === s)!.id as string;
    await crash(onShard(1));
    await db.pool.query(
      `UPDATE gen_durable_bucket_configs SET shards = 1 WHERE kind = 'conc' AND name = 'shrink'`,
    );
    await limiter.reconcile();
    // Shard 0 now holds the whole limit, less its one holder; shard 2 waits for its holder.
    expect(await bucketsOf(db, 'conc', 'shrink:a')).toMatchObject([
      { shard: 0, capacity: 3, available: 2 },
      { shard: 2, capacity: 1, available: 0 },
    ]);
  });

  it('backfills missing in-range shards after a shards increase, and follows a limit change', async () => {
    await hold('grow:a', 1);
    await db.pool.query(
      `UPDATE gen_durable_bucket_configs SET shards = 2, capacity = 6 WHERE kind = 'conc' AND name = 'grow'`,
    );
    await limiter.reconcile();
    expect(await bucketsOf(db, 'conc', 'grow:a')).toMatchObject([
      { shard: 0, capacity: 3, available: 2 },
      { shard: 1, capacity: 3, available: 3 },
    ]);
  });

  it('prunes idle, refilled rate buckets and buckets whose config is gone; keeps busy ones and rate 0', async () => {
    const idle = await insertExecuting(db, 1, { rateKey: 'idler:a' });
    const busy = await insertExecuting(db, 1, { rateKey: 'busy:a' });
    const dropped = await insertExecuting(db, 1, { rateKey: 'dropped:a' });
    await limiter.admit(
      [
        ...entriesOf(idle, { rateKey: 'idler:a' }),
        ...entriesOf(busy, { rateKey: 'busy:a' }),
        ...entriesOf(dropped, { rateKey: 'dropped:a' }),
      ],
      'gc',
    );
    await db.pool.query(
      `INSERT INTO gen_durable_bucket_configs (kind, name, rate, capacity, shards) VALUES ('rate', 'frozen', 0, 1, 1)`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available, last_refill) VALUES ('rate', 'frozen:a', 0, 1, 0, now() - interval '1 day')`,
    );
    // idler: burst 10 at 10/s refills in 1 s; pretend it was last used 2 s ago.
    await db.pool.query(
      `UPDATE gen_durable_buckets SET last_refill = now() - interval '2 seconds' WHERE key = 'idler:a'`,
    );
    await db.pool.query(
      `DELETE FROM gen_durable_bucket_configs WHERE kind = 'rate' AND name = 'dropped'`,
    );
    const result = await limiter.reconcile();
    expect(result.buckets).toBe(2);
    expect((await bucketsOf(db, 'rate')).map((b) => b.key)).toEqual(['busy:a', 'frozen:a']);
    // A pruned bucket re-mints with zero lag.
    const again = await insertExecuting(db, 1, { rateKey: 'idler:a' });
    expect(
      (await limiter.admit(entriesOf(again, { rateKey: 'idler:a' }), 'gc')).admitted,
    ).toHaveLength(1);
  });

  it('leaves a rate key alone unless every shard is lockable now', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable_bucket_configs (kind, name, rate, capacity, shards) VALUES ('rate', 'split', 10, 10, 2)`,
    );
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available, last_refill)
       VALUES ('rate', 'split:a', 0, 5, 5, now() - interval '1 hour'), ('rate', 'split:a', 1, 5, 5, now() - interval '1 hour')`,
    );
    const other = await openRawSession(db);
    try {
      await other.exec('BEGIN');
      await other.exec(
        `SELECT 1 FROM gen_durable_buckets WHERE kind = 'rate' AND key = 'split:a' AND shard = 1 FOR UPDATE`,
      );
      expect((await limiter.reconcile()).buckets).toBe(0);
      expect(await bucketsOf(db, 'rate', 'split:a')).toHaveLength(2);
      await other.exec('COMMIT');
    } finally {
      await other.close();
    }
    // Both shards go together (`buckets` counts deleted rows).
    expect((await limiter.reconcile()).buckets).toBe(2);
    expect(await bucketsOf(db, 'rate', 'split:a')).toEqual([]);
  });
});

@DurableFsm({ name: 'nothing', queue: 'none' })
class NothingFsm {
  @Step() start() {
    return done({});
  }
}

describe('GC through the engine', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('reports gc:swept {count, heads, buckets, gates} when the limiter repaired something', async () => {
    const h = await bootEngine(db, [NothingFsm], {
      queues: {},
      gc: { interval: 3_600_000 },
      concurrencyLimits: { api: { limit: 2 } },
      rateLimits: { quick: { allowed: 10, period: 1 } },
    });
    try {
      const ids = await insertExecuting(db, 1, { gateKey: 'api:1' });
      await h.engine.runtime.limiter.admit(entriesOf(ids, { gateKey: 'api:1' }), 'none');
      const rated = await insertExecuting(db, 1, { rateKey: 'quick:1' });
      await h.engine.runtime.limiter.admit(entriesOf(rated, { rateKey: 'quick:1' }), 'none');
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', concurrency_shard = NULL, updated_at = now() WHERE id = ANY ($1::bigint[])`,
        [[...ids, ...rated]],
      );
      await db.pool.query(
        `UPDATE gen_durable_buckets SET last_refill = now() - interval '10 seconds' WHERE kind = 'rate'`,
      );
      h.clear();
      await h.engine.runtime.gc!.sweep();
      // Rows are within retention (count 0); one rate bucket pruned; the idle gate key dropped.
      expect(h.eventsOf('gc:swept').map((e) => e.measurements)).toEqual([
        { count: 0, heads: 0, buckets: 1, gates: 1 },
      ]);
      expect(await bucketsOf(db, 'conc')).toEqual([]);
      expect(h.statements).toEqual(
        expect.arrayContaining([
          'gc_select_terminal',
          'prune_rate_buckets',
          'begin',
          'lock_gate_shards',
          'reconcile_gates',
          'commit',
        ]),
      );
    } finally {
      await h.close();
    }
  });
});
