'use strict';
// Shared by `npm run sample` (run-sample.cjs) and `npm run smoke:nest12` (smoke-nest12.cjs):
// a PostgreSQL for the sample, building it, and running it as a child that gets exactly one
// shutdown signal.
//
// NOTE: signals. Ctrl-C sends SIGINT to the whole foreground process group, and `npm run`
// forwards it once more. Nest's shutdown hooks handle the first signal and drop their
// listeners, so a second one kills the app mid-drain; and a PostgreSQL in the same group
// would start a fast shutdown while the app still needs it. So both the embedded PostgreSQL
// (through a helper process: `node sample-support.cjs serve-postgres`) and the app run
// detached, in their own sessions, and only the launcher signals them: the app once, then the
// database after the app has exited.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');

const { postgresCanReach } = require('./embedded-postgres.cjs');

const ROOT = path.resolve(__dirname, '..');
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function say(message) {
  process.stdout.write(`[gen-durable] ${message}\n`);
}

/**
 * The sample's persistent data folder: `<repo>/.data/pg`, or, when running as root and the
 * `postgres` OS user cannot reach the checkout, a fixed folder under the OS temp dir.
 */
function sampleDataDir() {
  const preferred = path.join(ROOT, '.data', 'pg');
  if (!isRoot || postgresCanReach(ROOT)) {
    return preferred;
  }
  const fallback = path.join(os.tmpdir(), 'gen-durable-sample', 'pg');
  say(
    `running as root and the 'postgres' OS user cannot reach ${ROOT}: ` +
      `keeping the sample database in ${fallback} instead of ${preferred}`,
  );
  return fallback;
}

/**
 * Starts the embedded PostgreSQL in a detached helper process and resolves with its URL.
 * `stop()` ends the helper (it stops the server first). The helper also stops the server when
 * this process dies, because its stdin (a pipe from us) closes.
 * @param {{ dataDir?: string, persistent?: boolean }} opts
 */
function startPostgresHelper(opts = {}) {
  const args = [__filename, 'serve-postgres'];
  if (opts.dataDir) {
    args.push('--data-dir', opts.dataDir);
  }
  if (opts.persistent) {
    args.push('--persistent');
  }
  const helper = spawn(process.execPath, args, {
    detached: true,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) =>
    helper.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: helper.stdout });
    let settled = false;
    lines.once('line', (line) => {
      settled = true;
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        message = { error: `unexpected output from the PostgreSQL helper: ${line}` };
      }
      if (message.error) {
        reject(new Error(message.error));
        return;
      }
      resolve({
        url: message.url,
        dataDir: message.dataDir,
        async stop() {
          helper.stdin.end();
          const timer = setTimeout(() => helper.kill('SIGTERM'), 20000);
          await exited;
          clearTimeout(timer);
        },
      });
    });
    void exited.then(({ code, signal }) => {
      if (!settled) {
        reject(
          new Error(
            `the PostgreSQL helper exited before starting (code ${code}, signal ${signal})`,
          ),
        );
      }
    });
  });
}

/** The helper process: start, print `{url}` as one JSON line, stop when stdin closes. */
async function servePostgres(argv) {
  const { startEmbeddedPostgres } = require('./embedded-postgres.cjs');
  const dataDirIndex = argv.indexOf('--data-dir');
  const opts = {
    dataDir: dataDirIndex >= 0 ? argv[dataDirIndex + 1] : undefined,
    persistent: argv.includes('--persistent'),
  };
  const logLines = [];
  let pg;
  try {
    pg = await startEmbeddedPostgres({
      ...opts,
      log: (line) => {
        logLines.push(line);
        if (logLines.length > 50) {
          logLines.shift();
        }
      },
    });
  } catch (err) {
    const tail = logLines.join('').trim();
    const reason = err instanceof Error ? err.message : String(err || 'unknown error');
    process.stdout.write(
      `${JSON.stringify({ error: `embedded PostgreSQL did not start: ${reason}${tail ? `\n${tail}` : ''}` })}\n`,
    );
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ url: pg.url, dataDir: pg.dataDir })}\n`);
  let stopping = false;
  const stop = async () => {
    if (stopping) {
      return;
    }
    stopping = true;
    await pg.stop();
    process.exit(0);
  };
  process.stdin.on('end', () => void stop());
  process.stdin.on('error', () => void stop());
  process.stdin.resume();
}

/** `url` with its database replaced by `database`. */
function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates `database` on the server of `url` if it does not exist; returns its URL. */
async function ensureDatabase(url, database) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      database,
    ]);
    if (!rowCount) {
      try {
        await client.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
      } catch (err) {
        // 42P04 duplicate_database: another process created it first.
        if (!err || err.code !== '42P04') {
          throw err;
        }
      }
    }
  } finally {
    await client.end();
  }
  return withDatabase(url, database);
}

/** Drops `database` on the server of `url` (the smoke's throwaway database). */
async function dropDatabase(url, database) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${database.replace(/"/g, '""')}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Runs a command to completion (inheriting stdio); rejects on a non-zero exit. */
function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', ...options });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) {
        resolve();
      } else {
        reject(
          new Error(
            `${path.basename(command)} ${args.join(' ')} failed (code ${code}, signal ${signal})`,
          ),
        );
      }
    });
  });
}

/** Compiles the sample (and the library it imports) with tsconfig.sample.json. */
async function buildSample(outDir) {
  const tsc = require.resolve('typescript/bin/tsc', { paths: [ROOT] });
  fs.rmSync(outDir, { recursive: true, force: true });
  await run(
    process.execPath,
    [tsc, '-p', path.join(ROOT, 'tsconfig.sample.json'), '--outDir', outDir],
    {
      cwd: ROOT,
    },
  );
}

/**
 * Spawns `node <script>` detached and resolves with its exit once it ends. `stop(signal)`
 * sends the signal once; a later call (after `graceMs`) kills it.
 */
function spawnApp(
  script,
  { env, nodeArgs = [], stdio = ['ignore', 'inherit', 'inherit'], graceMs = 15000 },
) {
  const child = spawn(process.execPath, [...nodeArgs, script], {
    detached: true,
    stdio,
    env: { ...process.env, ...env },
  });
  // If the launcher exits for any other reason, the app must not outlive it.
  const onExit = () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
    }
  };
  process.once('exit', onExit);
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      process.removeListener('exit', onExit);
      resolve({ code, signal });
    });
  });
  let signalledAt;
  let killTimer;
  return {
    child,
    exited,
    stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) {
        return;
      }
      if (signalledAt === undefined) {
        signalledAt = Date.now();
        child.kill(signal);
        killTimer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        void exited.then(() => clearTimeout(killTimer));
      } else if (Date.now() - signalledAt > 2000) {
        // A deliberate second Ctrl-C (not npm's echo of the first): stop waiting.
        say('second signal: killing the sample');
        child.kill('SIGKILL');
      }
    },
  };
}

/** `true` when a child that was asked to stop with `signal` ended cleanly. */
function stoppedCleanly(result, signal) {
  return result.code === 0 || result.signal === signal;
}

module.exports = {
  ROOT,
  say,
  sampleDataDir,
  startPostgresHelper,
  ensureDatabase,
  dropDatabase,
  withDatabase,
  run,
  buildSample,
  spawnApp,
  stoppedCleanly,
};

if (require.main === module && process.argv[2] === 'serve-postgres') {
  void servePostgres(process.argv.slice(3));
}
