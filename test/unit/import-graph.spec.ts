import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

import * as ts from 'typescript';

// ARCHITECTURE.md §1: the allowed-edges table. This file parses every lib/ source (no compiler
// run, no database) and fails on an import cycle between lib files — type-only imports and
// re-exports included, since a type cycle is a design cycle too — and on any import between two
// folders that the table below does not allow.

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');

/**
 * Leaves: folders and single files that import nothing from lib/ but other leaves. Anything may
 * import a leaf. A leaf file inside a non-leaf folder holds pure types or pure functions the
 * lower layers share (a schedule's declared shape, an instance's row shape, the fault-point
 * names) so that importing it loads nothing of its folder's machinery.
 */
export const LEAF_FOLDERS = [
  'constants',
  'errors',
  'util',
  'serialization',
  'fsm',
  'graph',
  'options',
  'telemetry',
] as const;
export const LEAF_FILES = [
  'lib/callbacks/callback-token.ts',
  'lib/cron/cron-expression.ts',
  'lib/db/array-literal.ts',
  'lib/sql/held-claim.ts',
  'lib/cron/fire-plan.ts',
  'lib/cron/resolved-schedule.ts',
  'lib/cron/schedule-spec.ts',
  'lib/instance/history-entry.ts',
  'lib/instance/inbox-signal.ts',
  'lib/instance/insert-row.ts',
  'lib/instance/instance-view.ts',
  'lib/instance/live-fsm-version.ts',
  'lib/instance/queue-status.ts',
  'lib/limiter/limiter.interface.ts',
  'lib/runtime/fault-points.ts',
  'lib/runtime/sweep-floor.ts',
  'lib/schema/index-build.ts',
] as const;

/**
 * The allowed edges between non-leaf folders (ARCHITECTURE.md §1): folder → the non-leaf
 * folders it may import. `module` is the root's `gen-durable.module*.ts`, `index` the public
 * entry. The faces (client, dashboard, cli, health, testing) reach instances through `control/`
 * and an engine through its token; `control/` never reaches `engine/` or `runtime/`; decorators
 * import constants and leaf types only.
 */
export const ALLOWED_EDGES: Readonly<Record<string, readonly string[]>> = {
  decorators: [],
  sql: [],
  schema: ['sql'],
  db: ['sql'],
  discovery: ['decorators'],
  instance: ['discovery'],
  cron: ['discovery', 'sql'],
  limiter: ['db', 'sql'],
  poke: ['db', 'sql'],
  control: ['cron', 'db', 'discovery', 'instance', 'limiter', 'sql'],
  runtime: ['cron', 'db', 'discovery', 'instance', 'limiter', 'poke', 'sql'],
  engine: [
    'control',
    'cron',
    'db',
    'discovery',
    'instance',
    'limiter',
    'poke',
    'runtime',
    'schema',
    'sql',
  ],
  module: ['engine'],
  client: ['control', 'cron', 'db', 'instance', 'poke', 'sql'],
  dashboard: ['control', 'engine'],
  cli: ['client', 'control', 'discovery', 'schema'],
  health: ['engine', 'sql'],
  callbacks: ['engine'],
  streams: ['engine'],
  http: [],
  testing: ['control', 'engine', 'instance', 'sql'],
  index: [
    'module',
    'engine',
    'control',
    'cron',
    'db',
    'decorators',
    'instance',
    'schema',
    'callbacks',
    'streams',
    'http',
  ],
};

/** The node of a lib file in the folder graph: its folder, or a root file's role. */
export function nodeOf(file: string): string {
  const [, first = '', ...rest] = file.split('/');
  if (rest.length > 0) return first;
  if (first === 'index.ts') return 'index';
  if (first === 'gen-durable.constants.ts') return 'constants';
  return 'module';
}

function isLeaf(file: string): boolean {
  return (
    (LEAF_FOLDERS as readonly string[]).includes(nodeOf(file)) ||
    (LEAF_FILES as readonly string[]).includes(file)
  );
}

/** Every import `graph` has that the table does not allow, as `file → target (why)`. */
export function disallowedEdges(
  graph: ReadonlyMap<string, readonly string[]>,
  allowed: Readonly<Record<string, readonly string[]>>,
): string[] {
  const bad: string[] = [];
  for (const [file, targets] of graph) {
    const from = nodeOf(file);
    for (const target of targets) {
      const to = nodeOf(target);
      if (isLeaf(file)) {
        if (!isLeaf(target)) bad.push(`${file} → ${target} (a leaf imports only leaves)`);
        continue;
      }
      if (from === to || isLeaf(target)) continue;
      if (!(allowed[from] ?? []).includes(to)) bad.push(`${file} → ${target} (${from} → ${to})`);
    }
  }
  return bad;
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...tsFiles(path));
    else if (entry.isFile() && entry.name.endsWith('.ts')) out.push(path);
  }
  return out.sort();
}

function rel(path: string): string {
  return relative(ROOT, path).split(sep).join('/');
}

/** The relative module specifiers of `text`: imports, `import type`, re-exports, `import()` types. */
function specifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.ES2022, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found.filter((s) => s.startsWith('.'));
}

/** A relative specifier from `from` → the lib file it names, or undefined (not a lib .ts file). */
function resolveSpecifier(from: string, specifier: string): string | undefined {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** file → the lib files it imports (all kinds of import). */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = specifiers(file, readFileSync(file, 'utf8'))
      .map((s) => resolveSpecifier(file, s))
      .filter((t): t is string => t !== undefined);
    graph.set(rel(file), [...new Set(targets.map(rel))]);
  }
  return graph;
}

/** The cycles of `graph`: its strongly connected components with more than one node, or a self-loop (Tarjan). */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const lowlinks = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const connect = (node: string): void => {
    indices.set(node, index);
    lowlinks.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        connect(next);
        lowlinks.set(node, Math.min(lowlinks.get(node)!, lowlinks.get(next)!));
      } else if (onStack.has(next)) {
        lowlinks.set(node, Math.min(lowlinks.get(node)!, indices.get(next)!));
      }
    }
    if (lowlinks.get(node) === indices.get(node)) {
      const component: string[] = [];
      for (;;) {
        const member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
        if (member === node) break;
      }
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) {
        cycles.push(component.sort());
      }
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) connect(node);
  return cycles;
}

describe('lib/ import graph (ARCHITECTURE.md §1 layering)', () => {
  describe('the cycle finder', () => {
    it('finds a two-file cycle, a longer one and a self-import', () => {
      const graph = new Map([
        ['a', ['b']],
        ['b', ['a']],
        ['c', ['d']],
        ['d', ['e']],
        ['e', ['c']],
        ['f', ['f']],
        ['g', ['a']],
      ]);
      expect(cyclesOf(graph)).toEqual(expect.arrayContaining([['a', 'b'], ['c', 'd', 'e'], ['f']]));
      expect(cyclesOf(graph)).toHaveLength(3);
    });

    it('finds none in a DAG', () => {
      const graph = new Map([
        ['a', ['b', 'c']],
        ['b', ['c']],
        ['c', []],
      ]);
      expect(cyclesOf(graph)).toEqual([]);
    });

    it('flags an upward edge, and a leaf importing a non-leaf', () => {
      const graph = new Map([
        [
          'lib/control/cancel-instance.ts',
          ['lib/engine/engine.service.ts', 'lib/sql/cancel.sql.ts'],
        ],
        ['lib/instance/history-entry.ts', ['lib/sql/history.sql.ts']],
        ['lib/sql/cancel.sql.ts', ['lib/fsm/outcome.ts', 'lib/instance/history-entry.ts']],
      ]);
      expect(disallowedEdges(graph, ALLOWED_EDGES)).toEqual([
        'lib/control/cancel-instance.ts → lib/engine/engine.service.ts (control → engine)',
        'lib/instance/history-entry.ts → lib/sql/history.sql.ts (a leaf imports only leaves)',
      ]);
    });

    it('reads type-only imports, re-exports and import() types', () => {
      const text = [
        "import type { A } from './a';",
        "export { B } from '../b';",
        "export type * from './c';",
        "type D = import('./d').D;",
        "import { E } from 'external';",
      ].join('\n');
      expect(specifiers('probe.ts', text)).toEqual(['./a', '../b', './c', './d']);
    });
  });

  const graph = importGraph(tsFiles(LIB));

  it('has the lib files', () => {
    expect(graph.size).toBeGreaterThan(50);
  });

  it('has no import cycle, type-only imports included', () => {
    // Break each cycle by moving the shared piece to the lower of the two modules.
    expect(cyclesOf(graph)).toEqual([]);
  });

  it('has every folder in the allowed-edges table or among the leaves', () => {
    const nodes = new Set([...graph.keys()].map(nodeOf));
    const placed = new Set([...Object.keys(ALLOWED_EDGES), ...LEAF_FOLDERS]);
    expect([...nodes].filter((n) => !placed.has(n))).toEqual([]);
    for (const file of LEAF_FILES) expect(graph.has(file)).toBe(true);
  });

  it('has only the edges the table allows (ARCHITECTURE.md §1)', () => {
    // A new upward edge fails here: move the shared piece down (a leaf file), or change the
    // table and ARCHITECTURE.md together, saying why.
    expect(disallowedEdges(graph, ALLOWED_EDGES)).toEqual([]);
  });

  it('keeps every lib/runtime file at 450 lines or fewer (ARCHITECTURE.md §1)', () => {
    // A runtime file past this has grown a second concern: split it along that concern (as
    // the scheduler's claim buffer and the executor's running steps were), not by line count.
    const runtime = tsFiles(join(LIB, 'runtime'));
    const long = runtime
      .map((file) => ({ file: rel(file), lines: readFileSync(file, 'utf8').split('\n').length }))
      .filter((f) => f.lines > 450);
    expect(runtime.length).toBeGreaterThan(20);
    expect(long).toEqual([]);
  });

  it('has no cycle between non-leaf folders', () => {
    const folders = new Map<string, string[]>();
    for (const [from, tos] of Object.entries(ALLOWED_EDGES)) folders.set(from, [...tos]);
    expect(cyclesOf(folders)).toEqual([]);
  });
});
