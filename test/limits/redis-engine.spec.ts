import { randomBytes } from 'node:crypto';

import { Redis } from 'ioredis';

import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { defaultRedisPrefix } from '../../lib/db/engine-namespace';
import { bootEngine, eventually, Gates, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, redisUrl, type TestDatabase } from '../support/test-database';
import { bucketsOf } from './support/limiter-fixtures';
import { PrivateRedis } from './support/private-redis';

// The engine on the Redis limiter (docs/design.md §16.3, §26.9), against a private redis-server the
// test kills and restarts empty: gates hold, an outage fails closed (rows stay runnable, the
// scheduler keeps polling), and after an empty restart the gate's holders are re-added from
// Postgres before anything else is admitted.
const url = redisUrl();
const latches = new Gates();
const inside = new Set<string>();

@DurableFsm({ name: 'redis-gated', queue: 'rg' })
class RedisGatedFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    inside.add(ctx.state.tag);
    await latches.wait(ctx.state.tag);
    inside.delete(ctx.state.tag);
    return done({});
  }
}

async function statuses(db: TestDatabase, ids: readonly string[]): Promise<string[]> {
  const { rows } = await db.pool.query(
    `SELECT status FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows.map((r) => r.status as string);
}

if (!url) {
  describe('engine on the Redis limiter', () => {
    it('needs Redis: GEN_DURABLE_TEST_REDIS_URL is unset, so these tests are skipped outside CI', () => {
      process.stdout.write(
        '[limits] Redis not reachable: Redis engine tests skipped (CI always runs them)\n',
      );
      expect(process.env['CI']).toBeFalsy();
    });
  });
} else {
  describe('engine on the Redis limiter', () => {
    let db: TestDatabase;
    let redis: PrivateRedis;
    let h: Harness;
    const prefix = `gd-${randomBytes(3).toString('hex')}:`;
    beforeAll(async () => {
      db = await createTestDatabase();
      redis = await PrivateRedis.start();
      h = await bootEngine(db, [RedisGatedFsm], {
        queues: { rg: 10 },
        limiter: { redis: { host: '127.0.0.1', port: redis.port, keyPrefix: prefix } },
        concurrencyLimits: { api: { limit: 2 } },
        rateLimits: { calls: { allowed: 3, period: [1, 'hour'] } },
        gc: false,
      });
    });
    afterAll(async () => {
      latches.openAll();
      await h.close();
      await redis.kill();
      await db.drop();
    });

    it('holds a gate at its limit and a bucket at its burst; nothing lands in the PG bucket tables', async () => {
      h.clear();
      const ids = await h.engine.insertAll(
        RedisGatedFsm,
        [1, 2, 3].map((i) => ({ state: { tag: `g-${i}` }, concurrencyKey: 'api:t' })),
      );
      await eventually(
        async () => [...inside].filter((t) => t.startsWith('g-')).length === 2,
        10_000,
      );
      await h.waitFor('concurrency:throttled', (e) => e.metadata['key'] === 'api:t');
      await sleep(200);
      expect([...inside].filter((t) => t.startsWith('g-'))).toHaveLength(2);
      for (const i of [1, 2, 3]) latches.open(`g-${i}`);
      await eventually(async () => (await statuses(db, ids)).every((s) => s === 'done'), 10_000);

      const rated = await h.engine.insertAll(
        RedisGatedFsm,
        [1, 2, 3, 4].map((i) => ({ state: { tag: `r-${i}` }, rateLimit: 'calls' })),
      );
      for (const i of [1, 2, 3, 4]) latches.open(`r-${i}`);
      await eventually(
        async () => (await statuses(db, rated)).filter((s) => s === 'done').length === 3,
        10_000,
      );
      await sleep(200);
      expect((await statuses(db, rated)).filter((s) => s !== 'done')).toHaveLength(1);
      expect([...(await bucketsOf(db, 'conc')), ...(await bucketsOf(db, 'rate'))]).toEqual([]);
      await db.pool.query(`DELETE FROM gen_durable WHERE id = ANY ($1::bigint[])`, [rated]);
    });

    it('heartbeats renew the holder score: a step longer than leaseTtl keeps its slot', async () => {
      // FAST timings: lease 2 s, heartbeat 0.5 s. Without renewal the holder's score would
      // pass after 2 s and the gate (limit 2) would admit a third row beside the two holders.
      const ids = await h.engine.insertAll(
        RedisGatedFsm,
        [1, 2, 3].map((i) => ({ state: { tag: `long-${i}` }, concurrencyKey: 'api:long' })),
      );
      await eventually(
        async () => [...inside].filter((t) => t.startsWith('long-')).length === 2,
        10_000,
      );
      await sleep(3_000);
      expect([...inside].filter((t) => t.startsWith('long-'))).toHaveLength(2);
      for (const i of [1, 2, 3]) latches.open(`long-${i}`);
      await eventually(async () => (await statuses(db, ids)).every((st) => st === 'done'), 10_000);
    });

    it('fails closed while Redis is down, re-adds holders after an empty restart, and never over-admits', async () => {
      // One holder of api:x runs; Redis dies and comes back empty while it still runs.
      const holder = await h.engine.insert(RedisGatedFsm, {
        state: { tag: 'hold-1' },
        concurrencyKey: 'api:x',
      });
      const second = await h.engine.insert(RedisGatedFsm, {
        state: { tag: 'hold-2' },
        concurrencyKey: 'api:x',
      });
      await eventually(async () => inside.has('hold-1') && inside.has('hold-2'), 10_000);
      await redis.kill();
      const waiting = await h.engine.insertAll(
        RedisGatedFsm,
        [1, 2].map((i) => ({ state: { tag: `wait-${i}` }, concurrencyKey: 'api:x' })),
      );
      // Down: every pick of the gated rows is denied and released; the schedulers keep going.
      await sleep(500);
      expect((await statuses(db, waiting)).filter((st) => st === 'done')).toEqual([]);
      expect([...inside].filter((t) => t.startsWith('wait-'))).toEqual([]);
      expect(h.engine.runtime.schedulers.get('rg')?.status).toBe('running');

      await redis.restart();
      // Up again, empty: once the limiter reconnected, its first admit re-adds the two
      // holders from Postgres (the seed marker appears), so the gate (limit 2) stays full.
      const probe = new Redis(redis.url, { keyPrefix: prefix });
      try {
        await eventually(
          async () =>
            (await probe.exists(`${defaultRedisPrefix(db.name, 'public', 'GenDurable')}seed`)) ===
            1,
          15_000,
          50,
        );
        expect(
          (
            await probe.zrange(
              `${defaultRedisPrefix(db.name, 'public', 'GenDurable')}conc:api:x`,
              0,
              '-1',
            )
          )
            .map((m) => m.split(':')[0])
            .sort(),
        ).toEqual([holder, second].sort());
      } finally {
        probe.disconnect();
      }
      await sleep(400); // several polls later
      expect([...inside].filter((t) => t.startsWith('wait-'))).toEqual([]);
      expect((await statuses(db, waiting)).filter((st) => st === 'done')).toEqual([]);
      expect([...inside].filter((t) => t.startsWith('wait-'))).toEqual([]);

      latches.open('hold-1');
      await h.engine.await(holder, { timeout: 10_000 });
      await eventually(
        async () => [...inside].filter((t) => t.startsWith('wait-')).length === 1,
        10_000,
      );
      expect(inside.has('hold-2')).toBe(true);
      latches.open('hold-2');
      latches.open('wait-1');
      latches.open('wait-2');
      await h.engine.await(second, { timeout: 10_000 });
      await eventually(
        async () => (await statuses(db, waiting)).every((s) => s === 'done'),
        10_000,
      );
    });
  });
}
