import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from 'pg';

import { trackResource } from '../../support/open-resources';

/**
 * A real PgBouncer (Debian's `pgbouncer` package) in front of the test server, started for one
 * test file on its own loopback port and folder, stopped by `stop()`. `poolMode` defaults to
 * `transaction`, the mode production poolers run and the one that breaks session state
 * (LISTEN, session `SET`, session advisory locks, named prepared statements on 1.18).
 * As root it runs as the `postgres` OS user (PgBouncer refuses root) from a folder that user
 * can read.
 */
export interface PgBouncer {
  readonly port: number;
  /** `upstreamUrl` with host and port replaced by PgBouncer's. */
  urlFor(upstreamUrl: string): string;
  /** PgBouncer's log so far (for a failing test's message). */
  log(): string;
  stop(): Promise<void>;
}

export const PGBOUNCER_BIN = '/usr/sbin/pgbouncer';

export function pgBouncerInstalled(): boolean {
  return existsSync(PGBOUNCER_BIN);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function startPgBouncer(
  upstreamUrl: string,
  options: { poolMode?: 'transaction' | 'session'; poolSize?: number } = {},
): Promise<PgBouncer> {
  if (!pgBouncerInstalled()) {
    // The project installs its own services (Debian's package, as root).
    execFileSync('bash', [join(__dirname, '..', '..', '..', 'scripts', 'ensure-pgbouncer.sh')], {
      stdio: 'inherit',
    });
  }
  if (!pgBouncerInstalled()) {
    throw new Error(
      `${PGBOUNCER_BIN} is missing: install Debian's package (apt-get install -y pgbouncer); .ci/run does`,
    );
  }
  const upstream = new URL(upstreamUrl);
  const user = decodeURIComponent(upstream.username || 'postgres');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gd-pgbouncer-'));
  chmodSync(dir, 0o755);
  const asRoot = process.getuid?.() === 0;
  const ini = [
    '[databases]',
    `* = host=${upstream.hostname} port=${upstream.port || '5432'}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'userlist.txt')}`,
    `pool_mode = ${options.poolMode ?? 'transaction'}`,
    'max_client_conn = 1000',
    `default_pool_size = ${options.poolSize ?? 20}`,
    'ignore_startup_parameters = extra_float_digits,options',
    `logfile = ${join(dir, 'pgbouncer.log')}`,
    `pidfile = ${join(dir, 'pgbouncer.pid')}`,
    'admin_users = postgres',
    '',
  ].join('\n');
  writeFileSync(join(dir, 'pgbouncer.ini'), ini);
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n"postgres" ""\n"root" ""\n`);
  writeFileSync(join(dir, 'pgbouncer.log'), '');
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const f of ['', 'pgbouncer.ini', 'userlist.txt', 'pgbouncer.log']) {
      chownSync(join(dir, f), uid, gid);
    }
  }
  const args = [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = spawn(PGBOUNCER_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  let running = true;
  child.once('exit', () => (running = false));
  trackResource(`pgbouncer :${port}`, () => running);
  const readLog = (): string => {
    try {
      return readFileSync(join(dir, 'pgbouncer.log'), 'utf8') + stderr;
    } catch {
      return stderr;
    }
  };
  const urlFor = (url: string): string => {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    return u.toString();
  };
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (!running) throw new Error(`pgbouncer exited at start:\n${readLog()}`);
    const client = new Client({ connectionString: urlFor(upstreamUrl) });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`pgbouncer did not answer within 15 s (${String(err)}):\n${readLog()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    port,
    urlFor,
    log: readLog,
    async stop() {
      if (running) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGINT');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
