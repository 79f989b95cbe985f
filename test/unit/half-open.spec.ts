import { createServer, type Server, type Socket } from 'node:net';

import { Pool } from 'pg';

import { SqlExecutor } from '../../lib/db/sql-executor';
import { noParams, sql } from '../../lib/sql/statement';
import { trackResource } from '../support/open-resources';

// Finding F-R7 (docs/reliability.md), docs/reliability.md S13/F-HALFOPEN: a peer that accepts TCP
// connections and then never answers (a blackholed link, a half-open socket). Without a
// `connectionTimeoutMillis` on the host's pool, node-postgres waits for the startup reply
// forever; the R1 chaos run saw a worker's pick hang for the whole partition. The engine
// bounds the wait for a connection by its own statementTimeout.

const PROBE = sql('chaos_probe_one', 'SELECT 1 AS one', {
  params: noParams,
  decode: () => undefined,
});

describe('half-open peer', () => {
  let server: Server;
  let port = 0;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.add(socket); // accepted, never answered
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    port = typeof address === 'object' && address ? address.port : 0;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('a statement waiting for a connection gives up at statementTimeout (the pool has no connect timeout)', async () => {
    const pool = new Pool({
      connectionString: `postgres://postgres@127.0.0.1:${port}/none`,
      max: 2,
    });
    let open = true;
    trackResource('half-open pool', () => open);
    pool.on('error', () => undefined);
    const executor = new SqlExecutor(pool, {
      schema: 'public',
      preparedStatements: true,
      statementTimeoutMs: 300,
    });
    const started = Date.now();
    await expect(PROBE.run(executor)).rejects.toThrow(
      /timeout: no database connection within 300 ms/,
    );
    await expect(executor.transaction(async () => 'never')).rejects.toThrow(/timeout/);
    // Bounded (generously: a loaded CI box), not the hours a half-open socket can last.
    expect(Date.now() - started).toBeLessThan(10_000);
    for (const s of sockets) s.destroy();
    await pool.end().catch(() => undefined);
    open = false;
  });
});
