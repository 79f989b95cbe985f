'use strict';
// `npm run smoke:nest12`: boots the sample app on NestJS 12 with plain `node`.
//
// NestJS 12 is ESM-only and jest on Node 20 cannot load it, so the jest suite runs on NestJS 11
// (dev dependency) and this script covers 12: it installs NestJS 12 into a temporary folder,
// compiles the sample (and the library it imports) into that folder so `require('@nestjs/core')`
// resolves to the temporary node_modules, boots it (CommonJS requiring ESM: Node >= 20.19),
// waits for HTTP 200 on `/`, sends SIGTERM and checks that the app shut down cleanly.
//
// Database: a throwaway database on DATABASE_URL's server, or an embedded PostgreSQL.
// Set GEN_DURABLE_SMOKE_KEEP=1 to keep the temporary folder.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { randomBytes } = require('node:crypto');
const { createRequire } = require('node:module');

const {
  say,
  startPostgresHelper,
  ensureDatabase,
  dropDatabase,
  run,
  buildSample,
  spawnApp,
  stoppedCleanly,
} = require('./sample-support.cjs');
const { freePort } = require('./embedded-postgres.cjs');

/** The library's own runtime dependencies (the compiled sample runs the library from source). */
const LIBRARY_DEPENDENCIES = Object.entries(require('../package.json').dependencies ?? {}).map(
  ([name, range]) => `${name}@${range}`,
);

const PACKAGES = [
  ...LIBRARY_DEPENDENCIES,
  '@nestjs/common@12',
  '@nestjs/core@12',
  '@nestjs/platform-express@12',
  '@nestjs/typeorm@latest',
  '@nestjs/terminus@12',
  'typeorm@0.3',
  'pg',
  'reflect-metadata',
  'rxjs',
];
const BOOT_TIMEOUT_MS = 60000;
const STOP_TIMEOUT_MS = 20000;

function nodeSupportsRequireEsm() {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    throw new Error(`Node ${process.versions.node}: NestJS 12 from CommonJS needs Node >= 20.19`);
  }
  // Enabled by default from 20.19 / 22.12; the flag turns it on where it is not.
  return process.features.require_module === true;
}

function get(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.setTimeout(2000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function waitForHttp(url, app, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void app.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) {
      throw new Error('the sample exited before answering HTTP');
    }
    try {
      const res = await get(url);
      if (res.status === 200) {
        return res;
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`no HTTP 200 from ${url} within ${timeoutMs} ms`);
}

function installedVersion(fromFile, pkg) {
  // Resolve the entry point the way the sample does, then walk up to the package's own
  // package.json (not every package exports `./package.json`).
  let dir = path.dirname(createRequire(fromFile).resolve(pkg));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const json = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (json.name === pkg) {
        return { version: json.version, dir };
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) {
      throw new Error(`no package.json of ${pkg} above ${fromFile}`);
    }
    dir = parent;
  }
}

async function npmInstall(dir) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const base = ['install', '--no-audit', '--no-fund', '--loglevel=error', ...PACKAGES];
  try {
    await run(npm, base, { cwd: dir });
    return false;
  } catch (err) {
    // @nestjs/typeorm may lag a NestJS major; its newest release then installs fine with
    // --legacy-peer-deps (the smoke shows whether it really works).
    say(`npm install failed (${err.message}); retrying with --legacy-peer-deps`);
    await run(npm, [...base, '--legacy-peer-deps'], { cwd: dir });
    return true;
  }
}

async function main() {
  const nodeArgs = nodeSupportsRequireEsm() ? [] : ['--experimental-require-module'];
  const keep = Boolean(process.env.GEN_DURABLE_SMOKE_KEEP);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gen-durable-nest12-'));
  const report = [];
  let postgres;
  let serverUrl;
  let database;
  let app;

  const cleanup = async () => {
    if (app) {
      app.stop('SIGKILL');
    }
    if (serverUrl && database) {
      await dropDatabase(serverUrl, database).catch((err) =>
        say(`could not drop ${database}: ${err.message}`),
      );
    }
    if (postgres) {
      await postgres.stop();
    }
    if (keep) {
      say(`kept ${tmp}`);
    } else {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  };

  try {
    say(
      `Node ${process.version}; require(esm) ${nodeArgs.length ? 'behind --experimental-require-module' : 'on by default'}`,
    );
    say(`temporary folder ${tmp}`);
    await run(
      process.platform === 'win32' ? 'npm.cmd' : 'npm',
      ['init', '-y', '--loglevel=error'],
      {
        cwd: tmp,
        stdio: 'ignore',
      },
    );
    say(`installing ${PACKAGES.join(' ')}`);
    const legacyPeers = await npmInstall(tmp);
    report.push(
      `installed ${PACKAGES.join(' ')}${legacyPeers ? ' (with --legacy-peer-deps)' : ''}`,
    );

    const outDir = path.join(tmp, 'app');
    say('compiling the sample into the temporary folder (tsc -p tsconfig.sample.json)');
    await buildSample(outDir);
    const main = path.join(outDir, 'sample', 'main.js');

    // The compiled sample must resolve NestJS 12 from the temporary node_modules.
    const versions = {};
    for (const pkg of [
      '@nestjs/core',
      '@nestjs/common',
      '@nestjs/platform-express',
      '@nestjs/typeorm',
      '@nestjs/terminus',
      'typeorm',
    ]) {
      const { version, dir } = installedVersion(main, pkg);
      if (!dir.startsWith(tmp)) {
        throw new Error(`${pkg} resolves to ${dir}, outside ${tmp}`);
      }
      versions[pkg] = version;
    }
    if (!versions['@nestjs/core'].startsWith('12.')) {
      throw new Error(`expected @nestjs/core 12, resolved ${versions['@nestjs/core']}`);
    }
    report.push(
      `resolved ${Object.entries(versions)
        .map(([pkg, version]) => `${pkg}@${version}`)
        .join(', ')}`,
    );

    if (process.env.DATABASE_URL) {
      serverUrl = process.env.DATABASE_URL;
      say('using the server of DATABASE_URL');
    } else {
      say('no DATABASE_URL: starting embedded PostgreSQL');
      postgres = await startPostgresHelper();
      serverUrl = postgres.url;
    }
    database = `gen_durable_smoke_${randomBytes(4).toString('hex')}`;
    const databaseUrl = await ensureDatabase(serverUrl, database);
    report.push(
      `database ${database} (${postgres ? 'embedded PostgreSQL' : 'DATABASE_URL server'}), dropped afterwards`,
    );

    const port = await freePort();
    let output = '';
    say(`booting node ${[...nodeArgs, path.relative(tmp, main)].join(' ')} on port ${port}`);
    app = spawnApp(main, {
      nodeArgs,
      env: { DATABASE_URL: databaseUrl, PORT: String(port), NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
      graceMs: STOP_TIMEOUT_MS,
    });
    for (const stream of [app.child.stdout, app.child.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        output += chunk;
        process.stdout.write(chunk.replace(/^(?=.)/gm, '  | '));
      });
    }

    const res = await waitForHttp(`http://127.0.0.1:${port}/`, app, BOOT_TIMEOUT_MS);
    const body = JSON.parse(res.body);
    if (body.name !== 'gen-durable sample' || body.ok !== true) {
      throw new Error(`unexpected body from GET /: ${res.body}`);
    }
    report.push(`GET / -> 200 ${res.body}`);

    app.stop('SIGTERM');
    const result = await app.exited;
    app = undefined;
    if (!stoppedCleanly(result, 'SIGTERM')) {
      throw new Error(
        `the sample did not stop cleanly on SIGTERM (code ${result.code}, signal ${result.signal})`,
      );
    }
    if (!/shut down on SIGTERM/.test(output)) {
      throw new Error('the sample exited without running its shutdown hooks');
    }
    if (/\bERROR\b|UnhandledPromiseRejection/.test(output)) {
      throw new Error('the sample logged an error (see above)');
    }
    if (/ExperimentalWarning/.test(output)) {
      report.push('note: Node printed an ExperimentalWarning (require of ESM)');
    }
    report.push(`SIGTERM -> shutdown hooks ran, exit ${result.code ?? result.signal}`);

    say(`NestJS 12 smoke passed: booted @nestjs/core@${versions['@nestjs/core']}`);
    for (const line of report) {
      say(`  - ${line}`);
    }
    return 0;
  } catch (err) {
    process.stderr.write(
      `[gen-durable] NestJS 12 smoke FAILED: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    for (const line of report) {
      say(`  - ${line}`);
    }
    return 1;
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
