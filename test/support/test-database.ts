import { randomBytes } from 'node:crypto';

import { Client, Pool } from 'pg';
import { DataSource } from 'typeorm';

import { migrateUp } from '../../lib/schema/migrator';
import { trackResource } from './open-resources';

/** The server of this jest run (global-setup.cjs). */
export function serverUrl(): string {
  const url = process.env['GEN_DURABLE_TEST_DATABASE_URL'];
  if (!url) {
    throw new Error(
      'GEN_DURABLE_TEST_DATABASE_URL is not set: run the tests through jest (global-setup.cjs)',
    );
  }
  return url;
}

export function redisUrl(): string | undefined {
  return process.env['GEN_DURABLE_TEST_REDIS_URL'];
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  /** A pool on the database, closed by `drop()`. */
  readonly pool: Pool;
  /** An initialized TypeORM DataSource on the database (lazily created), closed by `drop()`. */
  dataSource(): Promise<DataSource>;
  /** Closes everything opened here and drops the database. */
  drop(): Promise<void>;
}

/**
 * A fresh database for one test file (or one test), optionally migrated into `schema`.
 * Each file gets its own, so jest runs files in parallel without sharing state.
 */
export async function createTestDatabase(
  options: { migrate?: boolean; schema?: string; poolSize?: number } = {},
): Promise<TestDatabase> {
  const name = `gd_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(serverUrl(), name);
  const pool = new Pool({ connectionString: url, max: options.poolSize ?? 10 });
  // An idle client killed by the server (DROP DATABASE … FORCE, a test terminating backends)
  // must not surface as an uncaught error.
  pool.on('error', () => undefined);
  let poolOpen = true;
  trackResource(`pool ${name}`, () => poolOpen);
  if (options.migrate ?? true) {
    const client = await pool.connect();
    try {
      await migrateUp(
        { query: (text, params) => client.query(text, params), inTransaction: false },
        { schema: options.schema ?? 'public' },
      );
    } finally {
      client.release();
    }
  }
  let ds: DataSource | undefined;
  return {
    name,
    url,
    pool,
    async dataSource() {
      if (!ds) {
        ds = new DataSource({ type: 'postgres', url, poolSize: options.poolSize ?? 10 });
        await ds.initialize();
        const created = ds;
        trackResource(`DataSource ${name}`, () => created.isInitialized);
      }
      return ds;
    },
    async drop() {
      if (ds?.isInitialized) await ds.destroy();
      if (poolOpen) {
        poolOpen = false;
        await pool.end();
      }
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
