import type { RedisNamespace } from '../db/engine-namespace';
import type { SqlExecutor } from '../db/sql-executor';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import type { LimitConfig, Limiter } from './limiter.interface';
import { PostgresLimiter } from './postgres.limiter';
import { RedisLimiter } from './redis.limiter';

/** The backend `limiter` selects (docs/design.md §16): `'postgres'` (default) or `{ redis }`. */
export function createLimiter(
  options: ResolvedOptions,
  sql: SqlExecutor,
  telemetry: Telemetry,
  namespace: RedisNamespace,
): Limiter {
  if (options.limiter === 'postgres') return new PostgresLimiter(sql, telemetry);
  return new RedisLimiter(sql, namespace, options.limiter.redis, options.leaseTtl);
}

/** This node's own declarations, as seeded at boot (docs/design.md §16.1): gates and rate limits. */
export function limitConfigs(options: ResolvedOptions): LimitConfig[] {
  const gates = Object.values(options.concurrencyLimits).map((g): LimitConfig => ({
    kind: 'conc',
    name: g.name,
    rate: null,
    capacity: g.limit,
    shards: g.shards,
  }));
  const rates = Object.values(options.rateLimits).map((r): LimitConfig => ({
    kind: 'rate',
    name: r.name,
    rate: r.rate,
    capacity: r.burst,
    shards: r.shards,
  }));
  return [...gates, ...rates];
}
