import type { SqlExecutor } from '../db/sql-executor';
import type { ResolvedOptions } from '../options/resolved-options';
import { pokeChannel, pokeSenderToken } from './poke-channel';
import type { PokeTransport } from './poke-transport.interface';
import { listenerConnectionOf, PostgresPokeTransport } from './postgres.poke-transport';
import { RedisPokeTransport } from './redis.poke-transport';

/**
 * The cross-node leg for `options.poke` (docs/design.md §16.4): none for `'local'` and `'none'` (the
 * emitter alone decides whether local schedulers are poked).
 */
export function createPokeTransport(
  options: ResolvedOptions,
  sql: SqlExecutor,
): PokeTransport | undefined {
  const channel = pokeChannel(options.name);
  const sender = pokeSenderToken(options.nodeId);
  const poke = options.poke;
  if (poke === 'postgres' || (typeof poke === 'object' && 'postgres' in poke)) {
    const applicationName = `${channel}-listener`;
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
      pingIntervalMs: options.heartbeatInterval,
      statementTimeoutMs: options.statementTimeout,
    });
  }
  if (typeof poke === 'object') {
    return new RedisPokeTransport({
      channel,
      sender,
      redis: poke.redis,
      clientName: `${channel}`.replace(/[^A-Za-z0-9_:.-]/g, '_'),
      commandTimeoutMs: options.statementTimeout,
    });
  }
  return undefined;
}
