'use strict';
// Runs the project's TypeScript in a plain `node` process (child processes of tests and the
// chaos harness): `node -r ./test/support/ts-register.cjs file.ts`. Each .ts file outside
// node_modules is transpiled on require with the project's compiler options (transpile only:
// types are checked by `tsc --noEmit`, not here) and cached on disk by content hash, so a
// restarted worker process does not pay the transpile again.
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ts = require('typescript');

const root = path.resolve(__dirname, '../..');
const configFile = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
const parsed = ts.parseJsonConfigFileContent(configFile.config, ts.sys, root);
const compilerOptions = {
  ...parsed.options,
  module: ts.ModuleKind.CommonJS,
  sourceMap: false,
  inlineSourceMap: true,
  inlineSources: false,
  declaration: false,
  noEmit: false,
};
const cacheDir = path.join(os.tmpdir(), `gen-durable-ts-cache-${ts.version}`);
fs.mkdirSync(cacheDir, { recursive: true });
const optionsKey = crypto.createHash('sha1').update(JSON.stringify(compilerOptions)).digest('hex').slice(0, 8);

function compile(source, filename) {
  const key = crypto.createHash('sha1').update(optionsKey).update(filename).update(source).digest('hex');
  const cached = path.join(cacheDir, `${key}.js`);
  try {
    return fs.readFileSync(cached, 'utf8');
  } catch {
    // not cached yet
  }
  const out = ts.transpileModule(source, { compilerOptions, fileName: filename, reportDiagnostics: false }).outputText;
  const tmp = `${cached}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, out);
  fs.renameSync(tmp, cached);
  return out;
}

const previous = require.extensions['.ts'];
require.extensions['.ts'] = function registerTs(module, filename) {
  if (filename.includes(`${path.sep}node_modules${path.sep}`)) {
    if (previous) return previous(module, filename);
  }
  const source = fs.readFileSync(filename, 'utf8');
  module._compile(compile(source, filename), filename);
};
