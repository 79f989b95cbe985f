import { postgresPokeChannel, type RedisNamespace, redisKeys } from '../db/engine-namespace';
import type { SqlExecutor } from '../db/sql-executor';
import type { ResolvedOptions } from '../options/resolved-options';
import { pokeSenderToken } from './poke-channel';
import type { PokeTransport } from './poke-transport.interface';
import {
  listenerClientClassOf,
  listenerConnectionOf,
  PostgresPokeTransport,
} from './postgres.poke-transport';
import { RedisPokeTransport } from './redis.poke-transport';

/**
 * The cross-node leg for `options.poke` (docs/design.md §16.4): none for `'local'` and `'none'` (the
 * emitter alone decides whether local schedulers are poked).
 */
export function createPokeTransport(
  options: ResolvedOptions,
  sql: SqlExecutor,
  namespace: RedisNamespace,
): PokeTransport | undefined {
  const sender = pokeSenderToken(options.nodeId);
  const poke = options.poke;
  if (poke === 'postgres' || (typeof poke === 'object' && 'postgres' in poke)) {
    const channel = postgresPokeChannel(options.name, options.schema);
    const applicationName = `gen_durable:${options.name}:poke-listener`;
    return new PostgresPokeTransport(sql, {
      channel,
      sender,
      connection:
        poke === 'postgres'
          ? listenerConnectionOf(sql.pool, applicationName)
          : {
              connectionString: poke.postgres.connectionString,
              keepAlive: true,
              application_name: applicationName,
            },
      // The pool's own client class (e.g. multiHostClient), so the listener follows a failover.
      clientClass: poke === 'postgres' ? listenerClientClassOf(sql.pool) : undefined,
      pingIntervalMs: options.heartbeatInterval,
      statementTimeoutMs: options.statementTimeout,
    });
  }
  if (typeof poke === 'object') {
    return new RedisPokeTransport({
      channel: async () => redisKeys.poke(await namespace.prefix()),
      sender,
      redis: poke.redis,
      clientName: `gen_durable:${options.name}:poke`.replace(/[^A-Za-z0-9_:.-]/g, '_'),
      commandTimeoutMs: options.statementTimeout,
    });
  }
  return undefined;
}
