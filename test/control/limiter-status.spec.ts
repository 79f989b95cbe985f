import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §30 limiters view: declarations and live counters of the PostgreSQL limiter.

describe('engine.limiterStatus (docs/design.md §30)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [], {
      queues: {},
      reaper: false,
      gc: false,
      stats: false,
      concurrencyLimits: { api: { limit: 4, shards: 2 } },
      rateLimits: { mail: { allowed: 10, period: 1, burst: 20, shards: 2 } },
    });
    await db.pool.query(
      `INSERT INTO gen_durable_buckets (kind, key, shard, capacity, available, last_refill)
       VALUES ('conc', 'api:1', 0, 2, 1, NULL), ('conc', 'api:1', 1, 2, 0, NULL),
              ('rate', 'mail:x', 0, 10, 0, now()), ('rate', 'mail:x', 1, 10, 4, now())`,
    );
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('answers the declarations, gate holders / limit and rate tokens', async () => {
    const status = await h.engine.limiterStatus();
    expect(status.backend).toBe('postgres');
    expect(status.declarations).toEqual([
      { kind: 'gate', name: 'api', capacity: 4, perSecond: null, shards: 2 },
      { kind: 'rate', name: 'mail', capacity: 20, perSecond: 10, shards: 2 },
    ]);
    expect(status.gates).toEqual([{ name: 'api', key: 'api:1', shards: 2, holders: 3, limit: 4 }]);
    expect(status.buckets).toMatchObject([
      { name: 'mail', key: 'mail:x', shards: 2, capacity: 20, refillPerSecond: 10 },
    ]);
    const available = status.buckets[0]?.available ?? -1;
    expect(available).toBeGreaterThanOrEqual(4);
    expect(available).toBeLessThanOrEqual(20);
    expect(status.truncated).toBe(false);
  });

  it('reads at most cap counter rows', async () => {
    const status = await h.engine.limiterStatus({ cap: 2 });
    expect(status.truncated).toBe(true);
    expect(status.gates).toEqual([{ name: 'api', key: 'api:1', shards: 2, holders: 3, limit: 4 }]);
    expect(status.buckets).toEqual([]);
  });
});
