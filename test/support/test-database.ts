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
      process.env['GEN_DURABLE_TEST_TIER'] === 'unit'
        ? 'a unit spec (test/unit/) has no database: move this spec to the integration tier'
        : 'GEN_DURABLE_TEST_DATABASE_URL is not set: run the tests through jest (global-setup.cjs)',
    );
  }
  return url;
}

/** This run's migrated template database (template-database.cjs), if the set-up built one. */
function templateName(): string | undefined {
  return process.env['GEN_DURABLE_TEST_TEMPLATE'] || undefined;
}

/**
 * The databases this file created, when it runs in database-environment.cjs: that environment
 * drops them when the file ends, or keeps them (and prints their names) when it failed.
 */
function fileDatabases(): string[] | undefined {
  return (globalThis as { __GEN_DURABLE_TEST_DATABASES__?: string[] })
    .__GEN_DURABLE_TEST_DATABASES__;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `CREATE DATABASE name TEMPLATE template`. A copy fails with 55006 while anything is connected
 * to the template; the template refuses connections, so only a backend that is just leaving
 * can be there: retry briefly.
 */
async function cloneTemplate(client: Client, name: string, template: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '55006' || attempt >= 20) throw err;
      await sleep(100);
    }
  }
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
  /**
   * Closes everything opened here. The database itself is dropped when the file ends if the
   * file passed (database-environment.cjs), or right away outside that environment.
   */
  drop(): Promise<void>;
}

/**
 * A fresh database for one test file (or one test), optionally migrated into `schema`.
 * Each file gets its own, so jest runs files in parallel without sharing state. Migrated into
 * `public` (the default), it is a copy of the run's template database; otherwise it is created
 * empty and migrated here.
 */
export async function createTestDatabase(
  options: { migrate?: boolean; schema?: string; poolSize?: number } = {},
): Promise<TestDatabase> {
  const name = `gd_test_${randomBytes(6).toString('hex')}`;
  const migrate = options.migrate ?? true;
  const schema = options.schema ?? 'public';
  const template = migrate && schema === 'public' ? templateName() : undefined;
  await admin(async (c) => {
    if (template) await cloneTemplate(c, name, template);
    else await c.query(`CREATE DATABASE ${name}`);
  });
  const registry = fileDatabases();
  registry?.push(name);
  const url = withDatabase(serverUrl(), name);
  const pool = new Pool({ connectionString: url, max: options.poolSize ?? 10 });
  // An idle client killed by the server (DROP DATABASE … FORCE, a test terminating backends)
  // must not surface as an uncaught error.
  pool.on('error', () => undefined);
  let poolOpen = true;
  trackResource(`pool ${name}`, () => poolOpen);
  if (migrate && !template) {
    const client = await pool.connect();
    try {
      await migrateUp(
        { query: (text, params) => client.query(text, params), inTransaction: false },
        { schema },
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
      if (!registry) await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
