import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

import * as ts from 'typescript';

// ARCHITECTURE.md §1: imports run engine → runtime → (limiter, poke) → db → sql, with the
// leaves below. This file parses every lib/ source (no compiler run, no database) and fails on
// an import cycle between lib files — type-only imports and re-exports included, since a type
// cycle is a design cycle too — and on any import from lib/engine in the lower layers.

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');

/** Folders that sit below engine/ and must never import from it. */
const BELOW_ENGINE = ['runtime', 'limiter', 'poke', 'db', 'sql'];

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

  it(`has no import from lib/engine in ${BELOW_ENGINE.map((d) => `lib/${d}`).join(', ')}`, () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      if (!BELOW_ENGINE.some((d) => file.startsWith(`lib/${d}/`))) continue;
      for (const target of targets) {
        if (target.startsWith('lib/engine/')) upward.push(`${file} → ${target}`);
      }
    }
    // Move what the lower layer needs into it, or into a module both can import (lib/instance/).
    expect(upward).toEqual([]);
  });
});
