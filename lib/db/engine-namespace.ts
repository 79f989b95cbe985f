import { createHash } from 'node:crypto';

import { CURRENT_DATABASE } from '../sql/limiter.sql';
import type { SqlExecutor } from './sql-executor';

/** PostgreSQL truncates identifiers (a LISTEN channel) past NAMEDATALEN − 1 bytes. */
const MAX_CHANNEL_BYTES = 63;

/**
 * The NOTIFY channel of one engine's pokes (docs/design.md §16.4, §34):
 * `gen_durable:<schema>:<engine>:poke`. NOTIFY is per database already, so the schema and the
 * engine name keep two engines on one database apart. A name longer than PostgreSQL keeps is
 * shortened to its first bytes and a hash of the whole, so LISTEN and NOTIFY still agree and two
 * long names still differ.
 */
export function postgresPokeChannel(engine: string, schema: string): string {
  const full = `gen_durable:${schema}:${engine}:poke`;
  if (Buffer.byteLength(full, 'utf8') <= MAX_CHANNEL_BYTES) return full;
  const hash = createHash('sha256').update(full).digest('hex').slice(0, 16);
  let head = '';
  for (const char of full) {
    if (Buffer.byteLength(`${head}${char}`, 'utf8') > MAX_CHANNEL_BYTES - hash.length - 1) break;
    head += char;
  }
  return `${head}:${hash}`;
}

/** The default Redis prefix: `gd:<database>/<schema>/<engine>:`, each part URI-encoded. */
export function defaultRedisPrefix(database: string, schema: string, engine: string): string {
  const part = encodeURIComponent;
  return `gd:${part(database)}/${part(schema)}/${part(engine)}:`;
}

/**
 * The Redis namespace of one engine (docs/design.md §34): every key and channel it uses on Redis
 * starts with the `redisPrefix` option, or by default names the database, the schema and the
 * engine, so engines of different apps sharing one Redis never share a gate, a bucket, a seed
 * marker or a poke. The database name is read once, on first use (at start).
 */
export class RedisNamespace {
  private resolved: Promise<string> | undefined;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly engine: string,
    private readonly configured: string | undefined,
  ) {}

  /** The prefix of every key and channel (ends with the separator, e.g. `…:`). */
  prefix(): Promise<string> {
    if (this.configured !== undefined) return Promise.resolve(this.configured);
    this.resolved ??= CURRENT_DATABASE.run(this.sql).then(
      (database) => defaultRedisPrefix(database, this.sql.schema, this.engine),
      (err: unknown) => {
        this.resolved = undefined; // the next caller asks again
        throw err;
      },
    );
    return this.resolved;
  }
}

/** The keys and channel under one prefix. */
export const redisKeys = {
  gate: (prefix: string, key: string): string => `${prefix}conc:${key}`,
  rate: (prefix: string, key: string): string => `${prefix}rate:${key}`,
  seed: (prefix: string): string => `${prefix}seed`,
  /** A throttle's closed mark of a gate or bucket key (docs/design.md §16.5), expiring at its deadline. */
  closed: (prefix: string, kind: 'rate' | 'conc', key: string): string =>
    `${prefix}closed:${kind}:${key}`,
  poke: (prefix: string): string => `${prefix}poke`,
};
