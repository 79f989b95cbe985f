'use strict';
// `npm run compat`: does the packed package install and run next to today's stacks?
//
// `npm pack`s the library (after `npm run build`), then, one after another, in scratch folders
// under one temporary folder, installs the tarball from the registry's current releases — never
// with --legacy-peer-deps or --force — next to each combination below, compiles the app in
// scripts/compat/app under strict TypeScript (skipLibCheck off, so the published declarations
// are checked too, without @types/pg), runs it against PostgreSQL (insert, signal, await, a job
// with a retry, Terminus health; over HTTP, GenDurableExceptionFilter's 409 and 404; a host
// `signals` table made before the migration, left intact; a failed instance kept past the done
// retention) and runs its test on `gen-durable/testing`:
//
//   nest12-esm-vitest  "type": "module" (as `nest new` makes), NestJS 12, TypeORM 1, ioredis 6,
//                      Vitest with unplugin-swc on the sources (no `tsc` first, docs/testing.md);
//                      also an ESM app whose CommonJS dependency loads the CJS build
//   nest12-cjs-jest    first the README's install line, unpinned and in an empty folder, then
//                      jest in its ESM mode (docs/testing.md); CommonJS app, NestJS 12, TypeORM 1
//   nest11-cjs-jest    NestJS 11, TypeORM 0.3, ioredis 5, jest (CommonJS mode); also
//                      `moduleResolution: "node"` resolving gen-durable/testing and /health
//
// Each combination gets its own database on DATABASE_URL's server (or on an embedded
// PostgreSQL when DATABASE_URL is unset), dropped afterwards. ioredis is exercised (Redis pokes)
// where installed, when REDIS_URL is set. Nothing is cached outside the temporary folder but
// npm's own cache. GEN_DURABLE_COMPAT_KEEP=1 keeps the folder; GEN_DURABLE_COMPAT_ONLY=<name>
// runs one combination.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { randomBytes } = require('node:crypto');

const { say, startPostgresHelper, ensureDatabase, dropDatabase } = require('../sample-support.cjs');

const ROOT = path.resolve(__dirname, '..', '..');
const APP = path.join(__dirname, 'app');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const INSTALL_FLAGS = ['--no-audit', '--no-fund', '--loglevel=error'];
// ts-jest supports TypeScript < 7; every combination compiles with the same major.
const TYPESCRIPT = 'typescript@~6.0';
// Vitest 5 needs Node >= 22.12; on Node 20 the newest that runs is Vitest 4.
const VITEST = Number(process.versions.node.split('.')[0]) >= 22 ? 'vitest@latest' : 'vitest@4';

// docs/testing.md "Vitest": the test runs on the TypeScript sources, SWC emitting the decorator
// metadata Nest injects by (Vitest 3's esbuild transform does not), with no `tsc` step first.
const VITEST_CONFIG = `import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  plugins: [swc.vite()],
  test: { include: ['test/**/*.test.ts'], testTimeout: 30_000 },
});
`;

const JEST_IMPORTS = "import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';\n";
const VITEST_IMPORTS = "import { afterAll, beforeAll, describe, expect, it } from 'vitest';\n";

const COMBINATIONS = [
  {
    name: 'nest12-esm-vitest',
    type: 'module',
    redis: true,
    dual: true,
    expect: { '@nestjs/core': '12.', typeorm: '1.', ioredis: '6.' },
    // TypeORM 1.1.1 declares an optional peer ioredis ^5 (typeorm#12823); an app on ioredis 6
    // overrides it, as the README says.
    overrides: { typeorm: { ioredis: '^6.0.0' } },
    installs: [
      [
        '@nestjs/common@12',
        '@nestjs/core@12',
        '@nestjs/platform-express@12',
        '@nestjs/testing@12',
        '@nestjs/typeorm@latest',
        '@nestjs/terminus@12',
        'typeorm@1',
        'ioredis@6',
        'pg',
        'rxjs',
        'reflect-metadata',
        TYPESCRIPT,
        '@types/node@20',
        VITEST,
        'unplugin-swc',
        '@swc/core',
      ],
    ],
    testImports: VITEST_IMPORTS,
    vitestConfig: VITEST_CONFIG,
    test: { command: ['npx', 'vitest', 'run'], env: {} },
  },
  {
    name: 'nest12-cjs-jest',
    type: null, // no package.json before the first install: the README line in an empty folder
    redis: false,
    expect: { '@nestjs/core': '12.', typeorm: '1.' },
    installs: [
      // The README's install line, exactly: no pins, no flags.
      [
        '@nestjs/common',
        '@nestjs/core',
        '@nestjs/typeorm',
        'typeorm',
        'pg',
        'rxjs',
        'reflect-metadata',
      ],
      [
        '@nestjs/terminus',
        '@nestjs/testing',
        '@nestjs/platform-express',
        'jest@30',
        'ts-jest@29',
        '@types/jest@30',
        TYPESCRIPT,
        '@types/node@20',
      ],
    ],
    testImports: JEST_IMPORTS,
    jest: { esm: true },
    test: {
      command: ['npx', 'jest'],
      env: { NODE_OPTIONS: '--experimental-vm-modules --no-warnings=ExperimentalWarning' },
    },
  },
  {
    name: 'nest11-cjs-jest',
    type: 'commonjs',
    redis: true,
    node10: true,
    expect: { '@nestjs/core': '11.', typeorm: '0.3.', ioredis: '5.' },
    installs: [
      [
        '@nestjs/common@11',
        '@nestjs/core@11',
        '@nestjs/platform-express@11',
        '@nestjs/testing@11',
        '@nestjs/typeorm@11',
        '@nestjs/terminus@11',
        'typeorm@0.3',
        'ioredis@5',
        'pg',
        'rxjs',
        'reflect-metadata',
        'jest@29',
        'ts-jest@29',
        '@types/jest@29',
        TYPESCRIPT,
        '@types/node@20',
      ],
    ],
    testImports: JEST_IMPORTS,
    jest: { esm: false },
    test: { command: ['npx', 'jest'], env: {} },
  },
];

function exec(command, args, { cwd, env = {}, capture = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        output += chunk;
        if (!capture) process.stdout.write(chunk.replace(/^(?=.)/gm, '    | '));
      });
    }
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve(output);
      else {
        if (capture) process.stdout.write(output.replace(/^(?=.)/gm, '    | '));
        reject(new Error(`${command} ${args.join(' ')} failed (code ${code}, signal ${signal})`));
      }
    });
  });
}

async function hostSignalsTable(databaseUrl) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('CREATE TABLE signals (id serial PRIMARY KEY, body text NOT NULL)');
    await client.query("INSERT INTO signals (body) VALUES ('the host app owns this table')");
  } finally {
    await client.end();
  }
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

function copyDir(from, to) {
  fs.cpSync(from, to, { recursive: true });
}

/** The newest modification time under `dir` (ms). */
function newest(dir) {
  let time = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      time = Math.max(time, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return time;
}

async function pack(tmp) {
  // .ci/run builds just before; build here only when dist/ is missing or older than lib/.
  const built = ['cjs', 'esm'].every((b) => fs.existsSync(path.join(ROOT, 'dist', b, 'index.js')));
  if (!built || newest(path.join(ROOT, 'dist')) < newest(path.join(ROOT, 'lib'))) {
    say('npm run build');
    await exec(NPM, ['run', 'build', '--silent'], { cwd: ROOT, capture: true });
  }
  const out = await exec(NPM, ['pack', '--pack-destination', tmp, '--json', '--silent'], {
    cwd: ROOT,
    capture: true,
  });
  const [info] = JSON.parse(out.slice(out.indexOf('[')));
  say(`packed ${info.filename}: ${info.entryCount} files, ${info.size} bytes`);
  return path.join(tmp, info.filename);
}

function installedVersion(dir, pkg) {
  const file = path.join(dir, 'node_modules', pkg, 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

function tsconfigFor(combo) {
  return {
    compilerOptions: {
      target: 'ES2022',
      module: 'nodenext',
      moduleResolution: 'nodenext',
      strict: true,
      noUncheckedIndexedAccess: true,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
      skipLibCheck: false,
      types: combo.jest ? ['node', 'jest'] : ['node'],
      rootDir: '.',
      outDir: 'dist',
    },
    include: ['src', 'test'],
  };
}

function jestConfigFor(combo) {
  // Relative imports carry `.js` (ES-module style); jest maps them back to the .ts sources.
  const common = {
    testEnvironment: 'node',
    testMatch: ['<rootDir>/test/**/*.test.ts'],
    moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
    testTimeout: 30000,
  };
  const config = combo.jest.esm
    ? {
        ...common,
        extensionsToTreatAsEsm: ['.ts'],
        transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.jest.json' }] },
      }
    : { ...common, transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.jest.json' }] } };
  return `module.exports = ${JSON.stringify(config, null, 2)};\n`;
}

async function runCombination(combo, { tmp, tarball, serverUrl }) {
  const started = Date.now();
  const dir = path.join(tmp, combo.name);
  fs.mkdirSync(dir);
  say(`[${combo.name}] in ${dir}`);
  if (combo.type) {
    writeJson(path.join(dir, 'package.json'), {
      name: `gen-durable-compat-${combo.name}`,
      version: '0.0.0',
      private: true,
      type: combo.type,
      ...(combo.overrides ? { overrides: combo.overrides } : {}),
    });
  }
  if (combo.dual) copyDir(path.join(APP, 'compat-dep'), path.join(dir, 'compat-dep'));

  for (const [i, packages] of combo.installs.entries()) {
    const extra = i === 0 ? [tarball, ...(combo.dual ? ['./compat-dep'] : [])] : [];
    say(
      `[${combo.name}] npm install ${[...extra.map((p) => path.basename(p)), ...packages].join(' ')}`,
    );
    await exec(NPM, ['install', ...INSTALL_FLAGS, ...extra, ...packages], { cwd: dir });
  }
  const versions = {};
  for (const pkg of [
    'gen-durable',
    '@nestjs/core',
    '@nestjs/typeorm',
    '@nestjs/terminus',
    'typeorm',
    'ioredis',
    'typescript',
  ]) {
    if (fs.existsSync(path.join(dir, 'node_modules', pkg))) {
      versions[pkg] = installedVersion(dir, pkg);
    }
  }
  for (const [pkg, prefix] of Object.entries(combo.expect)) {
    if (!versions[pkg]?.startsWith(prefix)) {
      throw new Error(
        `[${combo.name}] expected ${pkg} ${prefix}x, installed ${versions[pkg] ?? 'none'}`,
      );
    }
  }
  say(
    `[${combo.name}] installed ${Object.entries(versions)
      .map(([p, v]) => `${p}@${v}`)
      .join(' ')}`,
  );
  if (combo.type === null) {
    // The README line ran in an empty folder; npm wrote a CommonJS package.json.
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    if (pkg.type === 'module') throw new Error('expected a CommonJS package.json from npm');
  }

  copyDir(path.join(APP, 'src'), path.join(dir, 'src'));
  fs.mkdirSync(path.join(dir, 'test'));
  const test = fs.readFileSync(path.join(APP, 'test', 'checkout.test.ts'), 'utf8');
  fs.writeFileSync(path.join(dir, 'test', 'checkout.test.ts'), combo.testImports + test);
  if (!combo.dual) fs.rmSync(path.join(dir, 'src', 'dual-main.ts'));
  writeJson(path.join(dir, 'tsconfig.json'), tsconfigFor(combo));
  say(`[${combo.name}] tsc (strict, skipLibCheck off)`);
  await exec('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: dir });

  if (combo.node10) {
    // TypeScript's legacy resolution ignores `exports`: typesVersions must map the subpaths.
    fs.writeFileSync(
      path.join(dir, 'node10-check.ts'),
      "import { GenDurableTesting } from 'gen-durable/testing';\n" +
        "import { GenDurableHealthModule } from 'gen-durable/health';\n" +
        "import { GenDurableModule } from 'gen-durable';\n" +
        'export const all = [GenDurableTesting, GenDurableHealthModule, GenDurableModule];\n',
    );
    writeJson(path.join(dir, 'tsconfig.node10.json'), {
      compilerOptions: {
        strict: true,
        module: 'commonjs',
        moduleResolution: 'node',
        ignoreDeprecations: '6.0',
        experimentalDecorators: true,
        types: ['node'],
        skipLibCheck: false,
        noEmit: true,
      },
      files: ['node10-check.ts'],
    });
    say(`[${combo.name}] tsc --moduleResolution node (typesVersions)`);
    await exec('npx', ['tsc', '-p', 'tsconfig.node10.json'], { cwd: dir });
  }

  const database = `gd_compat_${combo.name.replace(/-/g, '_')}_${randomBytes(3).toString('hex')}`;
  const databaseUrl = await ensureDatabase(serverUrl, database);
  // The host app already has a table of its own named `signals`: the migration leaves it alone.
  await hostSignalsTable(databaseUrl);
  const env = { DATABASE_URL: databaseUrl, NO_COLOR: '1' };
  if (combo.redis && process.env.REDIS_URL) env.REDIS_URL = process.env.REDIS_URL;
  else env.REDIS_URL = '';
  try {
    say(`[${combo.name}] node dist/src/main.js`);
    const out = await exec(process.execPath, ['dist/src/main.js'], { cwd: dir, env });
    if (!/^COMPAT OK /m.test(out)) {
      throw new Error(`[${combo.name}] the app did not report COMPAT OK`);
    }
    if (combo.dual) {
      say(`[${combo.name}] node dist/src/dual-main.js (ESM app, CommonJS dependency)`);
      const dual = await exec(process.execPath, ['dist/src/dual-main.js'], { cwd: dir, env });
      if (!/^COMPAT OK dual/m.test(dual)) throw new Error(`[${combo.name}] dual check failed`);
    }
    if (combo.jest) {
      fs.writeFileSync(path.join(dir, 'jest.config.cjs'), jestConfigFor(combo));
      writeJson(path.join(dir, 'tsconfig.jest.json'), {
        extends: './tsconfig.json',
        compilerOptions: combo.jest.esm
          ? { module: 'esnext', moduleResolution: 'bundler', isolatedModules: true }
          : { module: 'commonjs', moduleResolution: 'bundler', isolatedModules: true },
      });
    }
    if (combo.vitestConfig) {
      fs.writeFileSync(path.join(dir, 'vitest.config.ts'), combo.vitestConfig);
    }
    say(`[${combo.name}] ${combo.test.command.join(' ')}`);
    await exec(combo.test.command[0], combo.test.command.slice(1), {
      cwd: dir,
      env: { ...env, ...combo.test.env },
    });
  } finally {
    await dropDatabase(serverUrl, database).catch((err) =>
      say(`could not drop ${database}: ${err.message}`),
    );
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  return `${combo.name}: ${Object.entries(versions)
    .map(([p, v]) => `${p}@${v}`)
    .join(' ')} — ${seconds} s`;
}

async function main() {
  const keep = Boolean(process.env.GEN_DURABLE_COMPAT_KEEP);
  const only = process.env.GEN_DURABLE_COMPAT_ONLY;
  const combos = only ? COMBINATIONS.filter((c) => c.name === only) : COMBINATIONS;
  if (combos.length === 0) throw new Error(`no combination named ${only}`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gen-durable-compat-'));
  let postgres;
  const report = [];
  try {
    say(`Node ${process.version}; temporary folder ${tmp}`);
    const tarball = await pack(tmp);
    let serverUrl = process.env.DATABASE_URL;
    if (!serverUrl) {
      say('no DATABASE_URL: starting embedded PostgreSQL');
      postgres = await startPostgresHelper();
      serverUrl = postgres.url;
    }
    if (!process.env.REDIS_URL) say('REDIS_URL unset: the Redis pokes (ioredis) are not exercised');
    for (const combo of combos) {
      report.push(await runCombination(combo, { tmp, tarball, serverUrl }));
    }
    say('compat passed:');
    for (const line of report) say(`  - ${line}`);
    return 0;
  } catch (err) {
    process.stderr.write(
      `[gen-durable] compat FAILED: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    for (const line of report) say(`  - passed ${line}`);
    return 1;
  } finally {
    if (postgres) await postgres.stop();
    if (keep) say(`kept ${tmp}`);
    else fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
