import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import * as ts from 'typescript';

const ROOT = join(__dirname, '..', '..', '..');
const MARKER = /^<!-- example: (\S+) -->$/;

/**
 * The runnable example of a doc page: the ```ts block right after the page's first
 * `<!-- example: <name> -->` marker (or the one named `example`, on a page with several), with imports of `gen-durable` pointed at this repository's
 * `lib/`, written under `.tmp/doc-examples/<name>.ts`. Required through jest, it shares the
 * test's module registry; what the doc shows is exactly what the test runs.
 */
export function writeDocExample(doc: string, example?: string): { source: string; file: string } {
  const text = readFileSync(join(ROOT, 'docs', doc), 'utf8');
  const lines = text.split('\n');
  const markerAt = lines.findIndex((line) => {
    const m = MARKER.exec(line.trim());
    return m !== null && (example === undefined || m[1] === example);
  });
  if (markerAt < 0) {
    throw new Error(`docs/${doc} has no <!-- example: ${example ?? '…'} --> marker`);
  }
  const name = MARKER.exec(lines[markerAt]!.trim())![1]!;
  const open = lines.findIndex((line, i) => i > markerAt && line.trim() === '```ts');
  const close = lines.findIndex((line, i) => i > open && line.trim() === '```');
  // Prettier keeps one blank line between the marker and the block.
  const blankBetween = lines.slice(markerAt + 1, open).every((line) => line.trim() === '');
  if (open < 0 || !blankBetween || close < 0) {
    throw new Error(`docs/${doc}: the example marker must be followed by a \`\`\`ts block`);
  }
  const source = lines.slice(open + 1, close).join('\n');
  const lib = join(ROOT, 'lib').split('\\').join('/');
  const rewritten = source
    .replace(/from 'gen-durable\/(testing|client)'/g, `from '${lib}/$1'`)
    .replace(/from 'gen-durable'/g, `from '${lib}'`);
  const dir = join(ROOT, '.tmp', 'doc-examples');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.ts`);
  // Write-then-rename: parallel jest workers may generate the same example at once.
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(
    partial,
    `// Generated from docs/${doc} by test/docs/support/doc-example.ts — edit the doc, not this file.\n${rewritten}\n`,
  );
  renameSync(partial, file);
  return { source, file };
}

/** {@link writeDocExample}, then the example required as a module through jest. */
export function loadDocExample<T>(
  doc: string,
  example?: string,
): { module: T; source: string; file: string } {
  const { source, file } = writeDocExample(doc, example);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return { module: require(file) as T, source, file };
}

/**
 * Type-checks a generated example with the repository's tsconfig (jest only transpiles), and
 * returns the diagnostics as text: an example a reader copies must compile under `strict`.
 */
export function typeErrors(files: readonly string[]): string[] {
  const configPath = join(ROOT, 'tsconfig.json');
  const config = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const program = ts.createProgram([...files], { ...parsed.options, noEmit: true });
  const names = new Set(files.map((f) => f.split('\\').join('/')));
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file === undefined || names.has(d.file.fileName))
    .map(
      (d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
    );
}
