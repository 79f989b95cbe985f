import { randomBytes } from 'node:crypto';

import { Redis } from 'ioredis';

import {
  bootDashboardApp,
  DASHBOARD_TOKEN,
  type DashboardApp,
  DashChargeFsm,
  DashReportFsm,
  latch,
} from './support/dashboard-app';
import { freePort } from '../limits/support/private-redis';
import { createTestDatabase, redisUrl, type TestDatabase } from '../support/test-database';

// The limiters view on the Redis limiter (docs/dashboard.md "Views"): the live gate holders and
// bucket tokens come from Redis (engine.limiterStatus reads the limiter's keys), on the run's
// real Redis, under an ioredis `keyPrefix` as well as the engine's own prefix.

const url = redisUrl();

interface LimitersJson {
  backend: string;
  gates: { name: string; key: string; holders: number; limit: number; shards: number }[];
  buckets: { name: string; key: string; available: number; capacity: number }[];
  truncated: boolean;
  unreadable?: string;
}

if (url === undefined) {
  describe('dashboard limiters on Redis', () => {
    it('needs Redis: GEN_DURABLE_TEST_REDIS_URL is unset, so this file checks nothing else', () => {
      process.stderr.write('[browser] Redis not reachable: Redis limiters view not tested\n');
      expect(url).toBeUndefined();
    });
  });
} else {
  describe('dashboard limiters on Redis', () => {
    jest.setTimeout(60_000);
    let db: TestDatabase;
    let host: DashboardApp;
    let redis: Redis;
    const keyPrefix = `gd-dash-${randomBytes(3).toString('hex')}:`;
    const hold = 'redis-limiters';

    beforeAll(async () => {
      db = await createTestDatabase();
      redis = new Redis(url, { keyPrefix, lazyConnect: true });
      await redis.connect();
      const { hostname, port } = new URL(url);
      host = await bootDashboardApp(db, 'express', {
        engine: {
          limiter: { redis: { host: hostname, port: Number(port || 6379), keyPrefix } },
          stats: false,
          // 10 an hour: what the charges take stays taken while the test reads it
          rateLimits: { charge: { allowed: 10, period: [1, 'hour'] } },
        },
      });
    }, 60_000);

    afterAll(async () => {
      latch.open(hold);
      await host?.close();
      const keys = (await redis?.keys(`${keyPrefix}*`)) ?? [];
      if (keys.length > 0) await redis.del(...keys.map((k) => k.slice(keyPrefix.length)));
      redis?.disconnect();
      await db?.drop();
    });

    const limiters = async (): Promise<LimitersJson> =>
      (await (
        await fetch(`${host.url}/durable/api/limiters`, {
          headers: { 'x-dashboard-token': DASHBOARD_TOKEN },
        })
      ).json()) as LimitersJson;

    it('shows the gate holders and the bucket tokens Redis holds, and follows them', async () => {
      const before = await limiters();
      expect(before.backend).toBe('redis');
      expect(before.gates).toEqual([]);
      expect(before.buckets).toEqual([]);

      const running = await host.engine.insert(DashReportFsm, {
        state: { hold },
        concurrencyKey: ['report', 'nightly'],
      });
      for (let i = 0; i < 5; i++) {
        await host.engine.insert(DashChargeFsm, { state: { card: `c${i}` }, rateLimit: 'charge' });
      }
      const deadline = Date.now() + 15_000;
      for (;;) {
        const s = await limiters();
        const charged = s.buckets.find((b) => b.key === 'charge');
        if (s.gates.length === 1 && charged && charged.available < 6) break;
        if (Date.now() > deadline) {
          throw new Error(`Redis counters not shown: ${JSON.stringify(s)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const status = await limiters();
      expect(status.gates).toEqual([
        { name: 'report', key: 'report:nightly', shards: 1, holders: 1, limit: 2 },
      ]);
      // the same figure Redis holds: one member of the gate's sorted set
      expect(await redis.zcard(await gateKeyOf(redis, keyPrefix))).toBe(1);
      const bucket = status.buckets.find((b) => b.key === 'charge')!;
      expect(bucket).toMatchObject({ name: 'charge', capacity: 10 });
      // 5 tokens taken from 10, refilled at 10 an hour since
      expect(bucket.available).toBeGreaterThanOrEqual(5);
      expect(bucket.available).toBeLessThan(5.1);
      expect(await redis.hget(await rateKeyOf(redis, keyPrefix), 's')).toMatch(/^5(\.|$)/);
      expect(status.truncated).toBe(false);
      expect(status.unreadable).toBeUndefined();

      const page = await (
        await fetch(`${host.url}/durable/limiters`, {
          headers: { 'x-dashboard-token': DASHBOARD_TOKEN },
        })
      ).text();
      expect(page).toContain('Live counters read from Redis');
      expect(page).toMatch(/<td>report:nightly<\/td>\s*<td>1<\/td>\s*<td>1<\/td>\s*<td>2<\/td>/);

      latch.open(hold);
      const freed = Date.now() + 15_000;
      while ((await limiters()).gates.some((g) => g.holders > 0)) {
        if (Date.now() > freed) throw new Error('the gate holder was not credited');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect((await host.engine.get(running))?.status).toBe('done');
    });
  });
}

// A Redis that cannot be read: the limiter points at a port nothing listens on (real ioredis, real
// refused connections). The view still lists the declarations and says why it has no counters;
// nothing else on the page or in the API fails.
describe('dashboard limiters when Redis cannot be read', () => {
  jest.setTimeout(60_000);
  let db: TestDatabase;
  let host: DashboardApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    // Free a moment ago, closed again: nothing listens on it.
    const port = await freePort();
    host = await bootDashboardApp(db, 'express', {
      engine: {
        limiter: { redis: { host: '127.0.0.1', port } },
        stats: false,
        rateLimits: { charge: { allowed: 10, period: [1, 'hour'] } },
      },
    });
  }, 60_000);

  afterAll(async () => {
    await host?.close();
    await db?.drop();
  });

  it('answers the declarations and unreadable, and the page says Redis could not be read', async () => {
    const response = await fetch(`${host.url}/durable/api/limiters`, {
      headers: { 'x-dashboard-token': DASHBOARD_TOKEN },
    });
    expect(response.status).toBe(200);
    const status = (await response.json()) as LimitersJson & {
      declarations: { kind: string; name: string; capacity: number }[];
    };
    expect(status.backend).toBe('redis');
    expect(status.declarations).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'rate', name: 'charge' })]),
    );
    expect(status.gates).toEqual([]);
    expect(status.buckets).toEqual([]);
    expect(status.unreadable).toMatch(/Redis is not connected/);

    const page = await fetch(`${host.url}/durable/limiters`, {
      headers: { 'x-dashboard-token': DASHBOARD_TOKEN },
    });
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('id="unreadable"');
    expect(text).toContain('Redis could not be read');
    expect(text).toContain('charge');
  });
});

/** The one gate key the engine wrote under `keyPrefix` (without that prefix, as ioredis takes it). */
async function gateKeyOf(redis: Redis, keyPrefix: string): Promise<string> {
  const keys = await redis.keys(`${keyPrefix}*conc:report:nightly`);
  expect(keys).toHaveLength(1);
  return keys[0]!.slice(keyPrefix.length);
}

/** The rate key of `charge` the engine wrote under `keyPrefix` (without that prefix). */
async function rateKeyOf(redis: Redis, keyPrefix: string): Promise<string> {
  const keys = await redis.keys(`${keyPrefix}*rate:charge`);
  expect(keys).toHaveLength(1);
  return keys[0]!.slice(keyPrefix.length);
}
