import { spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';

import * as ts from 'typescript';

const ROOT = join(__dirname, '..', '..', '..');

/**
 * A build of the CLI laid out as the package ships it: `<dir>/dist/cjs/**` (lib/ compiled to
 * CommonJS with the compiler options of tsconfig.build.json), `<dir>/bin/gen-durable.cjs` (the
 * package's bin shim, unchanged) and `<dir>/node_modules` (a link to the repo's). Each file is
 * transpiled on its own (`isolatedModules`, as tsconfig.json sets): the same JavaScript `tsc`
 * emits, in about a second instead of a full type-checking build; `npx tsc` checks the types.
 * `fixtures` (paths under test/) are compiled to `<dir>/fixtures/<path>.js`, importing the built
 * lib/ (`../../../lib` → `<dir>/dist/cjs`).
 */
export interface BuiltCli {
  readonly dir: string;
  readonly bin: string;
  fixture(path: string): string;
  remove(): void;
}

function* tsFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = join(dir, entry.name);
    if (entry.isDirectory()) yield* tsFiles(file);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield file;
  }
}

function transpile(source: string, file: string): string {
  return ts.transpileModule(source, {
    fileName: file,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
      isolatedModules: true,
    },
  }).outputText;
}

export function buildCli(fixtures: readonly string[] = []): BuiltCli {
  const dir = mkdtempSync(join(tmpdir(), 'gen-durable-cli-'));
  const out = join(dir, 'dist', 'cjs');
  for (const file of tsFiles(join(ROOT, 'lib'))) {
    const target = join(out, relative(join(ROOT, 'lib'), file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, transpile(readFileSync(file, 'utf8'), file));
  }
  writeFileSync(join(out, 'package.json'), '{ "type": "commonjs" }\n');
  for (const fixture of fixtures) {
    const file = join(ROOT, fixture);
    const target = join(dir, 'fixtures', fixture).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    const libPath = relative(dirname(target), out).split('\\').join('/');
    const js = transpile(readFileSync(file, 'utf8'), file).replace(
      /require\("(?:\.\.\/)+lib([^"]*)"\)/g,
      (_, rest: string) => `require("${libPath}${rest}")`,
    );
    writeFileSync(target, js);
  }
  mkdirSync(join(dir, 'bin'));
  const bin = join(dir, 'bin', 'gen-durable.cjs');
  copyFileSync(join(ROOT, 'bin', 'gen-durable.cjs'), bin);
  chmodSync(bin, 0o755);
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return {
    dir,
    bin,
    fixture: (path) => join(dir, 'fixtures', path).replace(/\.ts$/, '.js'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** What one run of the CLI printed and how it exited. */
export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built bin with `args` (no shell), `env` added to this process's environment. */
export function runCli(
  cli: BuiltCli,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(cli.bin, [...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
