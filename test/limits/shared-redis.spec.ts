import { randomBytes } from 'node:crypto';

import { Redis } from 'ioredis';

import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { defaultRedisPrefix } from '../../lib/db/engine-namespace';
import { pokePayload } from '../../lib/poke/poke-channel';
import { bootEngine, Gates, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, redisUrl, type TestDatabase } from '../support/test-database';

// docs/design.md §34: two engines on different databases sharing one Redis never share a gate, a
// bucket, a seed marker or a poke. The same scenario run with one `redisPrefix` for both
// (`gd:`, the key names of the old shared naming) shows what the namespaces prevent.
const url = redisUrl();
const latches = new Gates();
const inside = new Set<string>();

@DurableFsm({ name: 'shared-redis', queue: 'sr' })
class SharedRedisFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    inside.add(ctx.state.tag);
    await latches.wait(ctx.state.tag);
    return done({});
  }
}

/** What engine A saw while engine B used the same gate, bucket and queue names. */
interface Observed {
  /** A's gated row while B held the gate's only slot: ran, or was throttled. */
  gate: 'ran' | 'throttled';
  /** A's rated row after B spent the bucket's only token: ran, or was throttled. */
  bucket: 'ran' | 'throttled';
  /** Whether B's announcement for queue `sr` reached A's scheduler. */
  pokedByB: boolean;
  /** The seed markers on Redis after both engines admitted (one per namespace). */
  seeds: number;
}

/** Which of the two happens first: A's row started its step, or A reported it throttled. */
async function ranOrThrottled(
  a: Harness,
  tag: string,
  event: 'concurrency:throttled' | 'rate_limit:throttled',
  key: string,
): Promise<'ran' | 'throttled'> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (inside.has(tag)) return 'ran';
    if (a.eventsOf(event).some((e) => e.metadata['key'] === key)) return 'throttled';
    await sleep(10);
  }
  throw new Error(`${tag}: neither ran nor was throttled within 20 s`);
}

function redisOptions(target: string, keyPrefix: string): Record<string, unknown> {
  const u = new URL(target);
  return { host: u.hostname, port: Number(u.port || 6379), keyPrefix };
}

async function scenario(
  target: string,
  dbA: TestDatabase,
  dbB: TestDatabase,
  redisPrefix: string | undefined,
): Promise<Observed> {
  const run = randomBytes(3).toString('hex');
  // The limiters' keys of this run only (an ioredis keyPrefix under the engine's own prefix).
  const keyPrefix = `sr-${run}:`;
  const options = (name: string) => ({
    name,
    queues: { sr: 4, sentinel: 1 },
    limiter: { redis: redisOptions(target, keyPrefix) },
    poke: { redis: target },
    concurrencyLimits: { api: { limit: 1 } },
    rateLimits: { calls: { allowed: 1, period: [1, 'hour'] as [number, 'hour'] } },
    // No poll during the scenario: a row runs because its own insert's poke found it.
    pollInterval: 60_000,
    maxPollInterval: 60_000,
    reaper: false as const,
    gc: false as const,
    ...(redisPrefix === undefined ? {} : { redisPrefix }),
  });
  const a = await bootEngine(dbA, [SharedRedisFsm], options('AppA'));
  const b = await bootEngine(dbB, [SharedRedisFsm], options('AppB'));
  const witness = new Redis(target);
  const publisher = new Redis(target);
  try {
    // Gate: B takes the only slot of api:t and keeps it; A asks for the same key.
    await b.engine.insert(SharedRedisFsm, {
      state: { tag: `${run}-b-gate` },
      concurrencyKey: 'api:t',
    });
    await latches.reached(`${run}-b-gate`);
    await a.engine.insert(SharedRedisFsm, {
      state: { tag: `${run}-a-gate` },
      concurrencyKey: 'api:t',
    });
    const gate = await ranOrThrottled(a, `${run}-a-gate`, 'concurrency:throttled', 'api:t');

    // Bucket: B spends the only token of `calls` (one an hour); A asks for one.
    await b.engine.insert(SharedRedisFsm, { state: { tag: `${run}-b-rate` }, rateLimit: 'calls' });
    await latches.reached(`${run}-b-rate`);
    await a.engine.insert(SharedRedisFsm, { state: { tag: `${run}-a-rate` }, rateLimit: 'calls' });
    const bucket = await ranOrThrottled(a, `${run}-a-rate`, 'rate_limit:throttled', 'calls');

    // Poke: B announces queue sr; a witness hears it on B's channel, then announces queue
    // `sentinel` on A's channel. Redis hands a PUBLISH to every subscriber before it answers,
    // so once A's sentinel scheduler is poked, A already had B's poke if it listens there.
    const schedulerOf = (queue: string) => {
      const found = a.engine.runtime.schedulers.get(queue);
      if (!found) throw new Error(`engine A runs no scheduler for ${queue}`);
      return found;
    };
    let pokedByB = false;
    let sentinelPoked!: () => void;
    const sentinel = new Promise<void>((resolve) => (sentinelPoked = resolve));
    const srPoke = jest.spyOn(schedulerOf('sr'), 'poke').mockImplementation(() => {
      pokedByB = true;
    });
    const sentinelPoke = jest
      .spyOn(schedulerOf('sentinel'), 'poke')
      .mockImplementation(() => sentinelPoked());
    try {
      const channelOf = async (h: Harness): Promise<string> => {
        const { rows } = await h.engine.runtime.sql.pool.query<{ d: string }>(
          'SELECT current_database() AS d',
        );
        const name = h.engine.runtime.options.name;
        return `${redisPrefix ?? defaultRedisPrefix(rows[0]!.d, 'public', name)}poke`;
      };
      const channelA = await channelOf(a);
      const channelB = await channelOf(b);
      const heardB = new Promise<void>((resolve) =>
        witness.on('message', (channel: string) => {
          if (channel === channelB) resolve();
        }),
      );
      await witness.subscribe(channelB);
      // insertAll announces its queue; a lone insert with a slot free on B would be written
      // claimed there and announce nothing (docs/design.md §5.5.1).
      await b.engine.insertAll(SharedRedisFsm, [{ state: { tag: `${run}-b-poke` } }]);
      await heardB;
      await publisher.publish(channelA, pokePayload('witness-0000', 'sentinel'));
      await sentinel;
    } finally {
      srPoke.mockRestore();
      sentinelPoke.mockRestore();
    }

    const seeds = (await publisher.keys(`${keyPrefix}*seed`)).length;
    return { gate, bucket, pokedByB, seeds };
  } finally {
    latches.openAll();
    witness.disconnect();
    publisher.disconnect();
    await a.close();
    await b.close();
  }
}

if (!url) {
  describe('two engines sharing one Redis', () => {
    it('needs Redis: GEN_DURABLE_TEST_REDIS_URL is unset, so these tests are skipped outside CI', () => {
      expect(process.env['CI']).toBeFalsy();
    });
  });
} else {
  describe('two engines on different databases sharing one Redis (docs/design.md §34)', () => {
    let dbA: TestDatabase;
    let dbB: TestDatabase;
    beforeAll(async () => {
      dbA = await createTestDatabase();
      dbB = await createTestDatabase();
    });
    afterAll(async () => {
      latches.openAll();
      await dbA.drop();
      await dbB.drop();
    });

    it('default namespaces: no shared gate, bucket, seed marker or poke', async () => {
      expect(await scenario(url, dbA, dbB, undefined)).toEqual({
        gate: 'ran',
        bucket: 'ran',
        pokedByB: false,
        seeds: 2,
      });
    });

    it('the old shared naming (one prefix `gd:` for both) fails the same scenario', async () => {
      expect(await scenario(url, dbA, dbB, 'gd:')).toEqual({
        gate: 'throttled',
        bucket: 'throttled',
        pokedByB: true,
        seeds: 1,
      });
    });
  });
}
