import type { Redis } from 'ioredis';

import { redisKeys } from '../db/engine-namespace';

/** One gate key of the Redis limiter: its live holders (members whose lease has not expired). */
export interface RedisGateCounter {
  readonly key: string;
  readonly holders: number;
}

/** One rate key of the Redis limiter: its stored tokens and when they were stored (Redis ms). */
export interface RedisBucketCounter {
  readonly key: string;
  readonly tokens: number;
  readonly storedAt: number;
}

/** What {@link readRedisCounters} answers: the counters and Redis's clock when read. */
export interface RedisCounters {
  readonly now: number;
  readonly gates: readonly RedisGateCounter[];
  readonly buckets: readonly RedisBucketCounter[];
  /** More than `cap` keys of a kind exist: the rest are not read. */
  readonly truncated: boolean;
}

const SCAN_COUNT = 500;

/** `text` as a literal part of a SCAN MATCH pattern (`*`, `?`, `[`, `]`, `\` escaped). */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Up to `cap` + 1 keys matching `<prefix><kind>:*`, by SCAN (never KEYS: it does not block Redis). */
async function scanKeys(client: Redis, pattern: string, cap: number): Promise<string[]> {
  const keys = new Set<string>();
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
    for (const k of batch) keys.add(k);
    cursor = next;
  } while (cursor !== '0' && keys.size <= cap);
  return [...keys].sort().slice(0, cap + 1);
}

/**
 * The Redis limiter's live counters for the limiters view (docs/design.md §16.3, §30): per gate
 * key (`<prefix>conc:<key>`, a sorted set scored by lease expiry) its members not yet expired,
 * per rate key (`<prefix>rate:<key>`, a hash `{t, s}`) its stored tokens and their time, and
 * Redis `TIME` (the limiter's clock) to refill them to. Keys are found by SCAN, at most `cap` of
 * each kind; a key Redis has expired or never held is absent (all free, a full bucket). Reads
 * only; not atomic across keys (a view, not a decision).
 */
export async function readRedisCounters(
  client: Redis,
  prefix: string,
  cap: number,
): Promise<RedisCounters> {
  const [seconds, micros] = await client.time();
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const gatePrefix = redisKeys.gate(prefix, '');
  const ratePrefix = redisKeys.rate(prefix, '');
  // ioredis adds its `keyPrefix` option to the keys of commands, but not to a SCAN pattern nor
  // removes it from SCAN's answer: both are done here.
  const io = client.options.keyPrefix ?? '';
  const unprefixed = (keys: string[]): string[] => keys.map((k) => k.slice(io.length));
  const [gateKeys, rateKeys] = await Promise.all([
    scanKeys(client, `${globLiteral(io + gatePrefix)}*`, cap).then(unprefixed),
    scanKeys(client, `${globLiteral(io + ratePrefix)}*`, cap).then(unprefixed),
  ]);
  const truncated = gateKeys.length > cap || rateKeys.length > cap;
  const gates = gateKeys.slice(0, cap);
  const rates = rateKeys.slice(0, cap);
  const pipeline = client.pipeline();
  for (const k of gates) pipeline.zcount(k, `(${now}`, '+inf');
  for (const k of rates) pipeline.hmget(k, 't', 's');
  const replies = (await pipeline.exec()) ?? [];
  const failed = replies.find(([err]) => err);
  if (failed) throw failed[0] as Error;
  const value = (i: number): unknown => replies[i]?.[1];
  return {
    now,
    truncated,
    gates: gates.map((k, i) => ({
      key: k.slice(gatePrefix.length),
      holders: Number(value(i) ?? 0),
    })),
    buckets: rates.flatMap((k, i) => {
      const [t, s] = (value(gates.length + i) ?? []) as (string | null)[];
      if (t == null || s == null) return []; // expired between the scan and the read: full
      return [{ key: k.slice(ratePrefix.length), tokens: Number(s), storedAt: Number(t) }];
    }),
  };
}
