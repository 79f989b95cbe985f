import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

// ARCHITECTURE.md's module table has one line per lib/ file, updated in the same
// commit as any file added, renamed or removed. This file fails when a lib/**/*.ts file or a
// lib/**/*.css asset (which the build copies beside the modules), on disk or tracked by git,
// is missing from the table, when the table names a file that exists neither
// on disk nor in git, or when a file is listed twice or without a responsibility.

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');
const MAP = join(ROOT, 'ARCHITECTURE.md');
/** The lib/ files the table lists: the modules and the assets the build copies (`.css`). */
const MAPPED = /\.(?:ts|css)$/;

/** A row of the module table: the file path (first cell, in backticks) and its responsibility. */
interface ModuleRow {
  readonly path: string;
  readonly responsibility: string;
  readonly line: number;
}

/**
 * The rows of the `## … Module map` section (up to the next `## ` heading), from every table
 * in it whose first cell is a backticked `lib/…` path. Rows of other sections are ignored.
 */
function moduleRows(markdown: string): ModuleRow[] {
  const lines = markdown.split(/\r?\n/);
  const start = lines.findIndex((l) => /^##\s+.*module map/i.test(l));
  if (start < 0) return [];
  const rows: ModuleRow[] = [];
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^##\s/.test(line)) break;
    if (!line.trimStart().startsWith('|')) continue;
    const cells = line
      .trim()
      .replace(/^\|/, '')
      .replace(/\|$/, '')
      .split('|')
      .map((c) => c.trim());
    const match = /^`(lib\/[^`]+)`$/.exec(cells[0] ?? '');
    if (!match?.[1]) continue;
    rows.push({ path: match[1], responsibility: cells.slice(1).join('|').trim(), line: i + 1 });
  }
  return rows;
}

function filesOnDisk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesOnDisk(path));
    else if (entry.isFile() && MAPPED.test(entry.name)) {
      out.push(relative(ROOT, path).split(sep).join('/'));
    }
  }
  return out;
}

/**
 * lib/**\/*.ts and *.css in git's index (tracked, including ones deleted on disk but not yet
 * `git rm`ed).
 */
function filesInGit(): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--', 'lib'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out.split('\0').filter((p) => MAPPED.test(p));
  } catch {
    // Not a git checkout (a packed source tree): the disk is the whole truth.
    return [];
  }
}

describe('ARCHITECTURE.md module table', () => {
  describe('the table reader', () => {
    const sample = [
      '# Title',
      '| File | Responsibility |',
      '|---|---|',
      '| `lib/outside.ts` | before the section: ignored |',
      '## 1. Module map',
      'Prose naming `lib/prose.ts` is not a row.',
      '### Root',
      '| File | Responsibility |',
      '|---|---|',
      '| `lib/index.ts` | the public surface |',
      '| `lib/a/b.ts` | one thing, with a pipe in `x \\| y` |',
      '| lib/unquoted.ts | not a path cell |',
      '## 2. Tables',
      '| `lib/after.ts` | after the section: ignored |',
    ].join('\n');

    it('reads backticked lib/ paths from the module-map section only', () => {
      expect(moduleRows(sample).map((r) => r.path)).toEqual(['lib/index.ts', 'lib/a/b.ts']);
      expect(moduleRows(sample)[0]?.responsibility).toBe('the public surface');
    });

    it('finds nothing without a module-map section', () => {
      expect(moduleRows('# Title\n| `lib/index.ts` | x |')).toEqual([]);
    });
  });

  const rows = moduleRows(readFileSync(MAP, 'utf8'));
  const listed = new Set(rows.map((r) => r.path));
  const present = new Set([...filesOnDisk(LIB), ...filesInGit()]);

  it('has a module table and lib/ has TypeScript files', () => {
    expect(rows.length).toBeGreaterThan(0);
    expect(present.size).toBeGreaterThan(0);
  });

  it('lists every lib/**/*.ts and *.css file (on disk or tracked)', () => {
    const missing = [...present].filter((p) => !listed.has(p)).sort();
    // Add one row per file to ARCHITECTURE.md §1, stating its one responsibility.
    expect(missing).toEqual([]);
  });

  it('names no file that no longer exists', () => {
    const stale = rows
      .filter((r) => !present.has(r.path))
      .map((r) => `ARCHITECTURE.md:${r.line}: ${r.path}`);
    // Remove or rename the row in the same commit that removed or renamed the file.
    expect(stale).toEqual([]);
  });

  it('lists each file once, with its responsibility', () => {
    const seen = new Set<string>();
    const problems: string[] = [];
    for (const r of rows) {
      if (seen.has(r.path)) problems.push(`ARCHITECTURE.md:${r.line}: ${r.path} listed again`);
      seen.add(r.path);
      if (r.responsibility.replace(/[|\s]/g, '').length === 0) {
        problems.push(`ARCHITECTURE.md:${r.line}: ${r.path} has no responsibility`);
      }
    }
    expect(problems).toEqual([]);
  });
});
