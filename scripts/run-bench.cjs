'use strict';
// `npm run bench -- [flags]`: installs the bench's own dependencies (bench/package.json, pinned
// peers) when bench/node_modules is missing, compiles bench/src with the repo's TypeScript, and
// runs the harness with the flags passed through. See docs/performance.md.
//
// The gen-durable adapter (bench/src/engines/gen-durable.ts) imports the library source and is
// compiled with it (tsc, so decorator metadata is emitted for Nest) — but only once lib/index.ts
// exports the public API it uses. Until then the peers are compiled alone
// (bench/tsconfig.peers.json) and the harness prints "gen-durable: not built yet".
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const bench = path.join(root, 'bench');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

function fail(message) {
  console.error(message);
  process.exit(1);
}

if (!fs.existsSync(path.join(root, 'node_modules', 'typescript'))) {
  fail('run-bench: the repo dependencies are missing: run `npm ci` at the repo root first.');
}

if (!fs.existsSync(path.join(bench, 'node_modules'))) {
  console.log('run-bench: installing the bench dependencies (npm ci --prefix bench)');
  if (run(npm, ['ci', '--prefix', 'bench', '--no-audit', '--no-fund']) !== 0) {
    fail('run-bench: npm ci --prefix bench failed');
  }
}

/** True when lib/index.ts exports every name the gen-durable adapter imports. */
function libReady() {
  const index = path.join(root, 'lib', 'index.ts');
  if (!fs.existsSync(index)) return false;
  const adapter = fs.readFileSync(path.join(bench, 'src', 'engines', 'gen-durable.ts'), 'utf8');
  const m = /import\s*\{([^}]*)\}\s*from\s*'\.\.\/\.\.\/\.\.\/lib'/.exec(adapter);
  if (!m) return false;
  const names = m[1]
    .split(',')
    .map((s) => s.replace(/^\s*type\s+/, '').trim())
    .filter(Boolean);
  // Resolve `export * from './x'` one level deep by reading the re-exported files.
  const seen = new Set();
  const collect = (file) => {
    if (seen.has(file) || !fs.existsSync(file)) return '';
    seen.add(file);
    let text = fs.readFileSync(file, 'utf8');
    for (const re of text.matchAll(/export\s+\*\s+from\s+'(\.[^']+)'/g)) {
      const target = path.resolve(path.dirname(file), re[1]);
      text += collect(
        fs.existsSync(target + '.ts') ? target + '.ts' : path.join(target, 'index.ts'),
      );
    }
    return text;
  };
  const text = collect(index);
  return names.every((n) => new RegExp(`\\b${n}\\b`).test(text));
}

const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const withGenDurable = libReady();
const project = path.join(bench, withGenDurable ? 'tsconfig.json' : 'tsconfig.peers.json');
const dist = path.join(bench, 'dist');
// A stale adapter from an earlier build must not be loaded when lib is not ready any more.
fs.rmSync(path.join(dist, 'bench', 'src', 'engines', 'gen-durable.js'), { force: true });
if (!withGenDurable) fs.rmSync(path.join(dist, 'lib'), { recursive: true, force: true });
if (run(process.execPath, [tsc, '-p', project]) !== 0) {
  fail(`run-bench: compiling the bench failed (${path.relative(root, project)})`);
}

const entry = path.join(dist, 'bench', 'src', 'main.js');
// --no-deprecation: a peer's own use of a deprecated pg call is not the bench's business.
const status = run(process.execPath, ['--no-deprecation', entry, ...process.argv.slice(2)]);
process.exit(status);
