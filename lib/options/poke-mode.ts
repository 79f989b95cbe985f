import { ConfigurationError } from '../errors/configuration.error';
import { isPlainObject, rejectUnknownKeys } from './option-declaration';
import { redisMode, type RedisMode } from './redis-mode';

/**
 * `poke: { postgres: { connectionString } }`: LISTEN on a dedicated session to that URL (a
 * direct connection to the server) while statements go through the DataSource's pool. A
 * transaction pooler (PgBouncer in `pool_mode = transaction`) does not keep a LISTEN session.
 */
export interface PostgresPokeMode {
  readonly postgres: { readonly connectionString: string };
}

export type PokeMode = 'local' | 'postgres' | 'none' | RedisMode | PostgresPokeMode;

const EXPECTED = "'local', 'postgres', 'none', { postgres: { connectionString } } or { redis }";

/** Parses the `poke` option at `path`. */
export function parsePoke(raw: unknown, path: string): PokeMode {
  if (raw === 'local' || raw === 'postgres' || raw === 'none') return raw;
  if (isPlainObject(raw) && 'postgres' in raw) {
    rejectUnknownKeys(path, raw, ['postgres']);
    const pg = raw['postgres'];
    if (!isPlainObject(pg)) {
      throw new ConfigurationError(`${path}.postgres`, 'must be { connectionString }');
    }
    rejectUnknownKeys(`${path}.postgres`, pg, ['connectionString']);
    const url = pg['connectionString'];
    if (typeof url !== 'string' || url.length === 0) {
      throw new ConfigurationError(
        `${path}.postgres.connectionString`,
        'must be a non-empty postgres:// URL of a direct (unpooled) connection',
      );
    }
    return Object.freeze({ postgres: Object.freeze({ connectionString: url }) });
  }
  if (isPlainObject(raw)) return redisMode(path, raw);
  throw new ConfigurationError(path, `must be ${EXPECTED}, got ${String(raw)}`);
}
