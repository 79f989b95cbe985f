'use strict';
// A require hook that lets a plain `node` child process load the project's TypeScript (the
// crash tests fork real worker processes; ts-node is not a dependency). Each .ts file outside
// node_modules is transpiled on load with typescript.transpileModule — no type check (jest and
// tsc do that) — using the compiler options the project's tsconfig relies on.
const fs = require('node:fs');
const ts = require('typescript');

const compilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  inlineSourceMap: true,
};

require.extensions['.ts'] = function loadTypeScript(module, filename) {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};
