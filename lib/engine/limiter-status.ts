import type { SqlExecutor } from '../db/sql-executor';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { LimiterStatus } from '../instance/limiter-status';
import { LIMIT_CONFIGS, LIMIT_COUNTERS } from '../sql/limiter-status.sql';

const DEFAULT_CAP = 1_000;

/**
 * The limiters view (docs/design.md §30; docs/dashboard-data.md): every configured gate and
 * rate limit, and the PostgreSQL limiter's counters live — per gate key its holders / limit,
 * per rate key its tokens now, capacity and refill — at most `cap` counter rows (default
 * 1 000) read. With the Redis limiter the counters are in Redis and only the declarations are
 * answered. Two statements; Nest-free.
 */
export async function readLimiterStatus(
  sql: SqlExecutor,
  backend: 'postgres' | 'redis',
  options: { cap?: number } = {},
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
    return { backend, declarations, gates: [], buckets: [], truncated: false };
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
