// PostgreSQL and Redis for the bench: the configured servers, or ones the bench starts itself;
// one freshly created database (and one Redis key prefix) per case.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { Client } from 'pg';
import Redis from 'ioredis';

export interface Infra {
  /** URL of a maintenance database on the server (CREATE/DROP DATABASE run there). */
  adminUrl: string;
  /** 'DATABASE_URL' or 'embedded PostgreSQL'. */
  pgLabel: string;
  pgVersion: string;
  pgSettings: Record<string, string>;
  redisUrl: string | undefined;
  /** 'REDIS_URL', 'redis://127.0.0.1:6379', 'redis-server child', or why there is none. */
  redisLabel: string;
  redisVersion: string | undefined;
  stop(): Promise<void>;
}

/** The repo root: the first parent folder holding scripts/embedded-postgres.cjs. */
export function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'scripts', 'embedded-postgres.cjs'))) return dir;
    const up = path.dirname(dir);
    if (up === dir)
      throw new Error(
        'cannot find the repo root (scripts/embedded-postgres.cjs) above ' + __dirname,
      );
    dir = up;
  }
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = '/' + db;
  return u.toString();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

async function redisPing(url: string): Promise<string | undefined> {
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    await r.ping();
    const info = await r.info('server');
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } catch {
    return undefined;
  } finally {
    r.disconnect();
  }
}

function hasBinary(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function startInfra(log: (m: string) => void): Promise<Infra> {
  const stops: Array<() => Promise<void>> = [];
  let adminUrl: string;
  let pgLabel: string;
  if (process.env.DATABASE_URL) {
    adminUrl = process.env.DATABASE_URL;
    pgLabel = 'DATABASE_URL';
  } else {
    log(
      'DATABASE_URL is not set: starting the embedded PostgreSQL (figures are labelled "embedded PostgreSQL")',
    );
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { startEmbeddedPostgres } = require(
      path.join(repoRoot(), 'scripts', 'embedded-postgres.cjs'),
    ) as {
      startEmbeddedPostgres: () => Promise<{ url: string; stop: () => Promise<void> }>;
    };
    const pg = await startEmbeddedPostgres();
    adminUrl = pg.url;
    pgLabel = 'embedded PostgreSQL';
    stops.push(() => pg.stop());
  }
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  const pgVersion = (await c.query<{ v: string }>('SELECT version() AS v')).rows[0]!.v;
  const settings = await c.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name = ANY($1)`,
    [
      [
        'fsync',
        'synchronous_commit',
        'full_page_writes',
        'shared_buffers',
        'max_connections',
        'wal_level',
      ],
    ],
  );
  await c.end();
  const pgSettings = Object.fromEntries(settings.rows.map((r) => [r.name, r.setting]));

  let redisUrl: string | undefined;
  let redisLabel: string;
  let redisVersion: string | undefined;
  if (process.env.REDIS_URL) {
    redisUrl = process.env.REDIS_URL;
    redisLabel = 'REDIS_URL';
    redisVersion = await redisPing(redisUrl);
    if (!redisVersion) throw new Error(`REDIS_URL=${redisUrl} does not answer PING`);
  } else if ((redisVersion = await redisPing('redis://127.0.0.1:6379'))) {
    redisUrl = 'redis://127.0.0.1:6379';
    redisLabel = 'redis://127.0.0.1:6379';
  } else if (hasBinary('redis-server')) {
    const port = await freePort();
    log(`no Redis at REDIS_URL or 127.0.0.1:6379: starting redis-server on port ${port}`);
    const child: ChildProcess = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    redisUrl = `redis://127.0.0.1:${port}`;
    for (let i = 0; i < 50 && !redisVersion; i++) {
      await new Promise((r) => setTimeout(r, 100));
      redisVersion = await redisPing(redisUrl);
    }
    if (!redisVersion) throw new Error('redis-server did not start');
    redisLabel = 'redis-server child';
    stops.push(async () => {
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 100));
    });
  } else {
    redisLabel =
      'none (no REDIS_URL, nothing on 127.0.0.1:6379, no redis-server binary): BullMQ on Redis skipped';
  }

  return {
    adminUrl,
    pgLabel,
    pgVersion,
    pgSettings,
    redisUrl,
    redisLabel,
    redisVersion,
    stop: async () => {
      for (const s of stops.reverse()) await s();
    },
  };
}

export interface CaseDb {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A freshly created database of its own for one case. */
export async function createCaseDb(infra: Infra, tag = 'bench'): Promise<CaseDb> {
  const name = `${tag}_${randomBytes(5).toString('hex')}`;
  const c = new Client({ connectionString: infra.adminUrl });
  await c.connect();
  try {
    await c.query(`CREATE DATABASE ${name}`);
  } finally {
    await c.end();
  }
  return {
    name,
    url: withDatabase(infra.adminUrl, name),
    drop: async () => {
      const d = new Client({ connectionString: infra.adminUrl });
      await d.connect();
      try {
        await d.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await d.end();
      }
    },
  };
}

/** A Redis key prefix of its own for one case; `clear()` deletes every key under it. */
export function casePrefix(): string {
  return `bench_${randomBytes(5).toString('hex')}`;
}

export async function clearRedisPrefix(url: string, prefix: string): Promise<void> {
  const r = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await r.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}
