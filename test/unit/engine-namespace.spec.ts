import { defaultRedisPrefix, postgresPokeChannel, redisKeys } from '../../lib/db/engine-namespace';

// docs/design.md §34: names outside the tables carry the engine, the schema (and the database).

describe('engine namespaces', () => {
  it('the default Redis prefix differs when only the database, the schema or the name does', () => {
    const base = defaultRedisPrefix('orders', 'public', 'GenDurable');
    expect(base).toBe('gd:orders/public/GenDurable:');
    expect(
      new Set([
        base,
        defaultRedisPrefix('billing', 'public', 'GenDurable'),
        defaultRedisPrefix('orders', 'jobs', 'GenDurable'),
        defaultRedisPrefix('orders', 'public', 'Other'),
      ]).size,
    ).toBe(4);
    // URI-encoded parts: a '/' inside a name cannot make two triples meet.
    expect(defaultRedisPrefix('a/b', 'c', 'E')).not.toBe(defaultRedisPrefix('a', 'b/c', 'E'));
  });

  it('keys and the poke channel sit under the prefix', () => {
    const p = 'gd:orders/public/GenDurable:';
    expect([
      redisKeys.gate(p, 'api:t'),
      redisKeys.rate(p, 'calls'),
      redisKeys.seed(p),
      redisKeys.poke(p),
    ]).toEqual([`${p}conc:api:t`, `${p}rate:calls`, `${p}seed`, `${p}poke`]);
  });

  it('the PostgreSQL channel names the schema and the engine, within 63 bytes', () => {
    expect(postgresPokeChannel('GenDurable', 'public')).toBe('gen_durable:public:GenDurable:poke');
    expect(postgresPokeChannel('GenDurable', 'jobs')).not.toBe(
      postgresPokeChannel('GenDurable', 'public'),
    );
    const long1 = postgresPokeChannel('E'.repeat(80), 'schéma_très_long');
    const long2 = postgresPokeChannel(`${'E'.repeat(79)}F`, 'schéma_très_long');
    for (const c of [long1, long2]) expect(Buffer.byteLength(c, 'utf8')).toBeLessThanOrEqual(63);
    expect(long1).not.toBe(long2);
    expect(long1.startsWith('gen_durable:schéma_très_long:EEE')).toBe(true);
  });
});
