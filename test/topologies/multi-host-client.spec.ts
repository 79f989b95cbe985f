import { createServer } from 'node:net';

import { type Client, Pool } from 'pg';

import { ConfigurationError, multiHostClient } from '../../lib';
import { listenerClientClassOf } from '../../lib/poke/postgres.poke-transport';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// multiHostClient (docs/operations.md, "Failover"): the first server that answers and accepts
// writes wins, whatever host the connection string names; a read-only server is passed over;
// when none matches, the error names every server and why. The promoted-standby case runs in
// failover.spec.ts.

function deadPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

describe('multiHostClient', () => {
  let db: TestDatabase;
  let live: { host: string; port: number };

  beforeAll(async () => {
    db = await createTestDatabase();
    const url = new URL(db.url);
    live = { host: url.hostname, port: Number(url.port || 5432) };
  });
  afterAll(async () => {
    await db.drop();
  });

  it('skips a server that refuses the connection, even the one the connection string names', async () => {
    const dead = { host: '127.0.0.1', port: await deadPort() };
    const url = new URL(db.url);
    url.port = String(dead.port);
    const pool = new Pool({
      connectionString: url.toString(),
      max: 1,
      Client: multiHostClient({ hosts: [dead, live] }) as unknown as typeof Client,
    });
    try {
      const { rows } = await pool.query<{ db: string }>('SELECT current_database() AS db');
      expect(rows[0]?.db).toBe(db.name);
    } finally {
      await pool.end();
    }
  });

  it("passes over a read-only server for 'read-write', takes it for 'any'", async () => {
    await db.pool.query(`ALTER DATABASE "${db.name}" SET default_transaction_read_only = on`);
    try {
      const strict = new Pool({
        connectionString: db.url,
        max: 1,
        Client: multiHostClient({ hosts: [live] }) as unknown as typeof Client,
      });
      await expect(strict.query('SELECT 1')).rejects.toThrow(
        `no server matched target_session_attrs=read-write: ${live.host}:${live.port} (default_transaction_read_only is on)`,
      );
      await strict.end();
      const any = new Pool({
        connectionString: db.url,
        max: 1,
        Client: multiHostClient({
          hosts: [live],
          targetSessionAttrs: 'any',
        }) as unknown as typeof Client,
      });
      const { rows } = await any.query<{ ro: string }>(
        `SELECT current_setting('transaction_read_only') AS ro`,
      );
      expect(rows[0]?.ro).toBe('on');
      await any.end();
    } finally {
      await db.pool.query(`ALTER DATABASE "${db.name}" RESET default_transaction_read_only`);
    }
  });

  it('names every server when none matches, and refuses a bad host list', async () => {
    const a = { host: '127.0.0.1', port: await deadPort() };
    const b = { host: '127.0.0.1', port: await deadPort() };
    const pool = new Pool({
      connectionString: db.url,
      max: 1,
      Client: multiHostClient({ hosts: [a, b], probeTimeoutMs: 1_000 }) as unknown as typeof Client,
    });
    await expect(pool.query('SELECT 1')).rejects.toThrow(
      new RegExp(`127\\.0\\.0\\.1:${a.port} \\(.*ECONNREFUSED.*\\); 127\\.0\\.0\\.1:${b.port} \\(`),
    );
    await pool.end();
    expect(() => multiHostClient({ hosts: [] })).toThrow(ConfigurationError);
    // The LISTEN client of poke 'postgres' is built from the pool's client class, so it follows
    // a failover too; a plain pool keeps pg's own.
    const ClientClass = multiHostClient({ hosts: [live] }) as unknown as typeof Client;
    const withClass = new Pool({ connectionString: db.url, Client: ClientClass });
    const plain = new Pool({ connectionString: db.url });
    expect(listenerClientClassOf(withClass)).toBe(ClientClass);
    expect(listenerClientClassOf(plain)).toBeUndefined();
    await Promise.all([withClass.end(), plain.end()]);
    expect(() => multiHostClient({ hosts: [{ host: '', port: 5432 }] })).toThrow(
      'multiHostClient.hosts[0]',
    );
  });
});
