'use strict';
// `npm run build`: compiles lib/ twice, into the two builds that package.json's `exports`
// conditions select between (docs/testing.md, "Module formats"):
//
//   dist/cjs  CommonJS (`require`): tsc -p tsconfig.build.json
//   dist/esm  ES modules (`import`): tsc -p tsconfig.build.esm.json, then the fix-ups below
//
// Node's ESM loader wants full relative specifiers, and the sources are written without
// extensions (as every CommonJS TypeScript code base is), so after tsc this script rewrites each
// relative specifier of dist/esm — in .js and .d.ts files alike — to the file it names
// (`./x` → `./x.js`, `./dir` → `./dir/index.js`), and gives the one module that resolves an
// optional peer synchronously (`require.resolve`) a `require` from `createRequire`. A specifier
// that names no emitted file fails the build. Each folder gets a package.json with its `type`.
// lib/'s `.css` files, which tsc does not emit (the dashboard's stylesheet,
// lib/dashboard/assets/dashboard.css), are copied into both builds at the same relative path,
// where the module serving them reads them at run time (`require.resolve` beside itself).
// No source maps are emitted (nothing would point at shipped sources).
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..');
const LIB = path.join(ROOT, 'lib');
const DIST = path.join(ROOT, 'dist');
const BUILDS = [
  { dir: 'cjs', tsconfig: 'tsconfig.build.json', type: 'commonjs' },
  { dir: 'esm', tsconfig: 'tsconfig.build.esm.json', type: 'module' },
];
// `from './x'`, `import './x'`, `import('./x')`, `export * from './x'` with a relative target.
const RELATIVE_SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?(?:\/[^'"]*)?)\2/g;
const USES_REQUIRE = /(?<![.\w$])require(?:\.resolve)?\s*\(/;
const REQUIRE_SHIM =
  "import { createRequire as __genDurableCreateRequire } from 'node:module';\n" +
  'const require = __genDurableCreateRequire(import.meta.url);\n';

function tsc(tsconfig) {
  const bin = require.resolve('typescript/bin/tsc', { paths: [ROOT] });
  const result = spawnSync(process.execPath, [bin, '-p', path.join(ROOT, tsconfig)], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (result.status !== 0) {
    throw new Error(`tsc -p ${tsconfig} failed (exit ${result.status ?? result.signal})`);
  }
}

function* walk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(file);
    else yield file;
  }
}

/** Copies lib/'s non-TypeScript assets (`.css`) into `outDir` at the same relative path. */
function copyAssets(outDir) {
  for (const file of walk(LIB)) {
    if (!file.endsWith('.css')) continue;
    const target = path.join(outDir, path.relative(LIB, file));
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.copyFileSync(file, target);
  }
}

/** The full specifier of `spec` as seen from `file`, or an error naming both. */
function fullSpecifier(file, spec) {
  if (/\.(?:c|m)?js$|\.json$/.test(spec)) return spec;
  const target = path.resolve(path.dirname(file), spec);
  if (fs.existsSync(`${target}.js`)) return `${spec}.js`;
  if (fs.existsSync(path.join(target, 'index.js'))) return `${spec.replace(/\/$/, '')}/index.js`;
  throw new Error(`${path.relative(ROOT, file)}: '${spec}' names no emitted module`);
}

function fixEsmFile(file) {
  const source = fs.readFileSync(file, 'utf8');
  let out = source.replace(
    RELATIVE_SPECIFIER,
    (_, lead, quote, spec) => `${lead}${quote}${fullSpecifier(file, spec)}${quote}`,
  );
  if (file.endsWith('.js') && USES_REQUIRE.test(out)) out = REQUIRE_SHIM + out;
  if (out !== source) fs.writeFileSync(file, out);
}

function main() {
  fs.rmSync(DIST, { recursive: true, force: true });
  for (const build of BUILDS) {
    tsc(build.tsconfig);
    const outDir = path.join(DIST, build.dir);
    copyAssets(outDir);
    if (build.type === 'module') {
      for (const file of walk(outDir)) {
        if (file.endsWith('.js') || file.endsWith('.d.ts')) fixEsmFile(file);
      }
    }
    fs.writeFileSync(
      path.join(outDir, 'package.json'),
      `${JSON.stringify({ type: build.type }, null, 2)}\n`,
    );
  }
  process.stdout.write(`built ${BUILDS.map((b) => `dist/${b.dir} (${b.type})`).join(', ')}\n`);
}

try {
  main();
} catch (err) {
  process.stderr.write(`[build] ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
