import type { SqlExecutor } from '../db/sql-executor';
import { InvalidInputError } from '../errors/invalid-input.error';
import { limitName } from '../fsm/limit-key';
import type { LimitDeclaration, LimiterStatus } from './limiter-status';
import type { RedisCounters } from '../limiter/redis-limiter-counters';
import { LIMIT_CONFIGS, LIMIT_COUNTERS } from '../sql/limiter-status.sql';

const DEFAULT_CAP = 1_000;

/**
 * The limiters view (docs/design.md §30; docs/dashboard-data.md): every configured gate and
 * rate limit, and the PostgreSQL limiter's counters live — per gate key its holders / limit,
 * per rate key its tokens now, capacity and refill — at most `cap` counter rows (default
 * 1 000) read. With the Redis limiter the counters are in Redis: read through `redis` (the
 * limiter's `counters`, at most `cap` keys of each kind) when given, else only the declarations
 * are answered; a Redis that cannot be read answers the declarations and `unreadable`. Two
 * statements (one with Redis); Nest-free.
 */
export async function readLimiterStatus(
  sql: SqlExecutor,
  backend: 'postgres' | 'redis',
  options: { cap?: number } = {},
  redis?: (cap: number) => Promise<RedisCounters>,
): Promise<LimiterStatus> {
  const cap = options.cap ?? DEFAULT_CAP;
  if (!Number.isInteger(cap) || cap < 1 || cap > 100_000) {
    throw new InvalidInputError('limiterStatus.cap', 'must be an integer in 1..100000');
  }
  const configs = await LIMIT_CONFIGS.run(sql);
  const declarations = configs.map((c) => ({
    kind: c.kind === 'conc' ? ('gate' as const) : ('rate' as const),
    name: c.name,
    capacity: c.capacity,
    perSecond: c.kind === 'rate' ? c.rate : null,
    shards: c.shards,
  }));
  if (backend === 'redis') {
    if (redis === undefined) {
      return { backend, declarations, gates: [], buckets: [], truncated: false };
    }
    try {
      return redisStatus(declarations, await redis(cap));
    } catch (err) {
      return {
        backend,
        declarations,
        gates: [],
        buckets: [],
        truncated: false,
        unreadable: String(err),
      };
    }
  }
  const { counters, truncated } = await LIMIT_COUNTERS.run(sql, { limit: cap });
  const round = (n: number): number => Math.round(n * 1000) / 1000;
  return {
    backend,
    declarations,
    gates: counters
      .filter((c) => c.kind === 'conc')
      .map((c) => ({
        name: c.name,
        key: c.key,
        shards: c.shards,
        holders: Math.max(0, Math.round(c.capacity - c.available)),
        limit: Math.round(c.capacity),
      })),
    buckets: counters
      .filter((c) => c.kind === 'rate')
      .map((c) => ({
        name: c.name,
        key: c.key,
        shards: c.shards,
        available: round(c.available),
        capacity: round(c.capacity),
        refillPerSecond: c.rate,
      })),
    truncated,
  };
}

/** The Redis counters against the declarations: a gate's limit, a bucket refilled to Redis's clock. */
function redisStatus(
  declarations: readonly LimitDeclaration[],
  counters: RedisCounters,
): LimiterStatus {
  const declared = (kind: 'gate' | 'rate', key: string): LimitDeclaration | undefined =>
    declarations.find((d) => d.kind === kind && d.name === limitName(key));
  const round = (n: number): number => Math.round(n * 1000) / 1000;
  return {
    backend: 'redis',
    declarations,
    gates: counters.gates.map((g) => ({
      name: limitName(g.key),
      key: g.key,
      shards: 1,
      holders: g.holders,
      limit: declared('gate', g.key)?.capacity ?? 0,
    })),
    buckets: counters.buckets.map((b) => {
      const d = declared('rate', b.key);
      const elapsed = Math.max(0, counters.now - b.storedAt);
      const available =
        d?.perSecond != null
          ? Math.min(d.capacity, b.tokens + (elapsed * d.perSecond) / 1000)
          : b.tokens;
      return {
        name: limitName(b.key),
        key: b.key,
        shards: 1,
        available: round(available),
        capacity: round(d?.capacity ?? b.tokens),
        refillPerSecond: d?.perSecond ?? null,
      };
    }),
    truncated: counters.truncated,
  };
}
