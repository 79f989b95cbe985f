import { ConfigurationError } from '../errors/configuration.error';
import type { RedisConnectionOptions } from './gen-durable-options.interface';
import { isPlainObject, rejectUnknownKeys } from './option-declaration';

/** The `{ redis }` form of the limiter and poke options. */
export interface RedisMode {
  readonly redis: RedisConnectionOptions;
}

function ioredisAvailable(): boolean {
  try {
    require.resolve('ioredis');
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks a `{ redis: url | ioredisOptions }` value at `path`, and that the optional peer
 * `ioredis` is installed (a Redis mode without it fails at boot, not at the first poke).
 */
export function redisMode(path: string, value: Record<string, unknown>): RedisMode {
  rejectUnknownKeys(path, value, ['redis']);
  const redis = value['redis'];
  if (typeof redis !== 'string' && !isPlainObject(redis)) {
    throw new ConfigurationError(`${path}.redis`, 'must be a redis URL or ioredis options object');
  }
  if (!ioredisAvailable()) {
    throw new ConfigurationError(
      path,
      "Redis mode needs the optional peer 'ioredis': npm install ioredis",
    );
  }
  return Object.freeze({ redis });
}
