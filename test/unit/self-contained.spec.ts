import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

// The repository is self-contained: a user or maintainer who clones it can follow every
// citation. The design rationale lives in docs/design.md (numbered sections), the reliability
// plan in docs/reliability.md (numbered sections, scenarios S01…, invariants I-…, figures F-…).
// This file fails when a file of the repository cites a document that is not in it (the
// contract, reliability or style documents the project was written against), links to a path
// outside the repository, cites a section of docs/design.md or docs/reliability.md that does
// not exist, links to a heading anchor that does not exist, or names a scenario, invariant or
// figure id that docs/reliability.md does not define. No database needed.

const ROOT = join(__dirname, '..', '..');
const DESIGN = 'docs/design.md';
const RELIABILITY_DOC = 'docs/reliability.md';
const SELF = relative(ROOT, __filename).split(sep).join('/');

/** Where citations are checked: the library, the docs, and everything else a maintainer reads. */
const SCANNED_DIRS = ['lib', 'docs', 'test', 'sample', 'bench', 'scripts', '.ci'];
const SCANNED_FILES = ['README.md', 'ARCHITECTURE.md', 'package.json'];
const TEXT_FILE = /\.(ts|cts|mts|js|cjs|mjs|md|json|sh|sql)$|^run$/;
const SKIPPED_FILES = new Set(['package-lock.json']);
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'results', 'coverage', '.git']);

function walk(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  if (statSync(abs).isFile()) return [dir];
  const out: string[] = [];
  for (const entry of readdirSync(abs, { withFileTypes: true })) {
    if (SKIPPED_DIRS.has(entry.name) || SKIPPED_FILES.has(entry.name)) continue;
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...walk(path));
    else if (entry.isFile() && TEXT_FILE.test(entry.name)) out.push(path);
  }
  return out;
}

function scannedFiles(): string[] {
  return [...SCANNED_DIRS.flatMap(walk), ...SCANNED_FILES.filter((f) => existsSync(join(ROOT, f)))]
    .filter((f) => f !== SELF)
    .sort();
}

/** A place in a file, for messages a reader can jump to. */
interface Hit {
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

function hits(files: readonly string[], pattern: RegExp): Hit[] {
  const out: Hit[] = [];
  for (const file of files) {
    const lines = readFileSync(join(ROOT, file), 'utf8').split(/\r?\n/);
    lines.forEach((line, i) => {
      for (const m of line.matchAll(
        new RegExp(pattern.source, pattern.flags.replace('g', '') + 'g'),
      )) {
        out.push({ file, line: i + 1, text: m[0] });
      }
    });
  }
  return out;
}

const show = (list: readonly Hit[]) => list.map((h) => `${h.file}:${h.line}: ${h.text}`);

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens, -N for repeats. */
function anchorsOf(markdown: string): Map<string, string> {
  const anchors = new Map<string, string>();
  const seen = new Map<string, number>();
  let fence = false;
  for (const line of markdown.split(/\r?\n/)) {
    if (/^\s*(```|~~~)/.test(line)) fence = !fence;
    const m = fence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m?.[1]) continue;
    const base = m[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.set(n === 0 ? base : `${base}-${n}`, m[1]);
  }
  return anchors;
}

/** The section numbers of a document: headings that start with `N.` or `N.M`. */
function sectionNumbers(markdown: string): Set<string> {
  const out = new Set<string>();
  for (const heading of anchorsOf(markdown).values()) {
    const m = /^(\d+(?:\.\d+)*)\.?\s/.exec(heading);
    if (m?.[1]) out.add(m[1]);
  }
  return out;
}

/**
 * Section numbers cited after `<doc> §` in a list such as `§6.5, §26.11`, `§6.2–6.4`,
 * `§5.3 and §14` or `§§8.1/8.2` (a range names both ends).
 */
function citedSections(files: readonly string[], doc: RegExp): Hit[] {
  const num = String.raw`\d+(?:\.\d+)*`;
  const item = String.raw`§?${num}(?:\s*[–-]\s*${num})?`;
  const list = new RegExp(
    String.raw`${doc.source}\s+§§?(${num}(?:\s*[–-]\s*${num})?(?:(?:\s*[,/]\s*|\s+and\s+)${item})*)`,
    'g',
  );
  const out: Hit[] = [];
  for (const hit of hits(files, list)) {
    for (const n of hit.text.replace(new RegExp(doc.source), '').matchAll(new RegExp(num, 'g'))) {
      out.push({ ...hit, text: n[0] });
    }
  }
  return out;
}

interface Link extends Hit {
  readonly label: string;
  readonly target: string;
}

/** Inline Markdown links `[label](target)` outside code fences. */
function markdownLinks(files: readonly string[]): Link[] {
  const out: Link[] = [];
  for (const file of files.filter((f) => f.endsWith('.md'))) {
    let fence = false;
    readFileSync(join(ROOT, file), 'utf8')
      .split(/\r?\n/)
      .forEach((line, i) => {
        if (/^\s*(```|~~~)/.test(line)) fence = !fence;
        if (fence) return;
        for (const m of line.matchAll(/\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
          out.push({ file, line: i + 1, text: m[0], label: m[1] ?? '', target: m[2] ?? '' });
        }
      });
  }
  return out;
}

function read(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

describe('the repository is self-contained', () => {
  const files = scannedFiles();

  it('scans the library, the docs, README.md and ARCHITECTURE.md', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'ARCHITECTURE.md', DESIGN]));
    expect(files.some((f) => f.startsWith('lib/'))).toBe(true);
  });

  it('cites no document that is not in the repository', () => {
    const outside = hits(
      files,
      /\b(?:SPEC|RELIABILITY|DEVELOPERS|ISSUES)\b|\bSTYLE(?:\.md\b|\s*§)|\bPERFORMANCE\s*§/,
    );
    expect(show(outside)).toEqual([]);
  });

  it('names no path outside the repository', () => {
    // A scratch file (/tmp/…) is outside the repository too: a command a reader cannot rerun.
    const paths = hits(
      files,
      /(?:\.\.\/)+shared\b|\/work\/[\w.-]+|(?<![\w.])\/tmp\/[\w.-]+\.(?:js|ts|cjs|mjs|sh)\b/,
    );
    const links = markdownLinks(files).filter((l) => {
      if (/^[a-z][a-z+.-]*:/i.test(l.target) || l.target.startsWith('#')) return false;
      const path = resolve(ROOT, dirname(l.file), l.target.split('#')[0] ?? '');
      return !(path === ROOT || path.startsWith(ROOT + sep)) || !existsSync(path);
    });
    expect([...show(paths), ...show(links)]).toEqual([]);
  });

  it(`every "design §N" names a section of ${DESIGN}`, () => {
    const sections = sectionNumbers(read(DESIGN));
    expect(sections.size).toBeGreaterThan(0);
    const missing = citedSections(files, /\bdesign(?:\.md)?/).filter((h) => !sections.has(h.text));
    expect(show(missing)).toEqual([]);
  });

  it(`every bare §N in code names a section of ${DESIGN}`, () => {
    // Code cites `docs/design.md §N` and continues lists with bare `§M`; any § number in a code
    // file that is not part of a reliability.md or ARCHITECTURE.md citation means the design.
    const sections = sectionNumbers(read(DESIGN));
    const code = files.filter((f) => /\.(ts|cts|mts|js|cjs|mjs)$/.test(f));
    const missing: Hit[] = [];
    for (const file of code) {
      read(file)
        .split(/\r?\n/)
        .forEach((line, i) => {
          for (const m of line.matchAll(/§(\d+(?:\.\d+)*)/g)) {
            const before = line.slice(0, m.index);
            if (/(?:reliability\.md|ARCHITECTURE\.md)[^.;:]*$/.test(before)) continue;
            if (!sections.has(m[1] ?? '')) missing.push({ file, line: i + 1, text: m[0] });
          }
        });
    }
    expect(show(missing)).toEqual([]);
  });

  it(`every "reliability §N" names a section of ${RELIABILITY_DOC}`, () => {
    const sections = sectionNumbers(read(RELIABILITY_DOC));
    const missing = citedSections(files, /\breliability(?:\.md| plan)?/).filter(
      (h) => !sections.has(h.text),
    );
    expect(show(missing)).toEqual([]);
  });

  it('every link to a heading anchor of a repository document exists, with the cited number', () => {
    const broken: string[] = [];
    for (const link of markdownLinks(files)) {
      const [path, anchor] = link.target.split('#');
      if (anchor === undefined || /^[a-z][a-z+.-]*:/i.test(link.target)) continue;
      const doc = path ? resolve(ROOT, dirname(link.file), path) : join(ROOT, link.file);
      if (!doc.endsWith('.md') || !existsSync(doc)) continue;
      const heading = anchorsOf(readFileSync(doc, 'utf8')).get(anchor);
      // A `§N` label on a link into the design or reliability document must be that section.
      const numbered = [DESIGN, RELIABILITY_DOC].some((d) => doc === join(ROOT, d));
      const cited = numbered ? /§\s*(\d+(?:\.\d+)*)/.exec(link.label)?.[1] : undefined;
      if (heading === undefined) {
        broken.push(`${link.file}:${link.line}: ${link.text} (no such heading)`);
      } else if (
        cited !== undefined &&
        !heading.startsWith(`${cited} `) &&
        !heading.startsWith(`${cited}. `)
      ) {
        broken.push(`${link.file}:${link.line}: ${link.text} (the heading is "${heading}")`);
      }
    }
    expect(broken).toEqual([]);
  });

  it(`every scenario, invariant and figure id is defined in ${RELIABILITY_DOC}`, () => {
    const doc = read(RELIABILITY_DOC);
    const defined = new Set<string>();
    for (const line of doc.split(/\r?\n/)) {
      const m =
        /^\|\s*(?:\*\*|`)?([SIF]-?[A-Z0-9-]*[A-Z0-9])(?:\*\*|`)?\s*\|/.exec(line) ??
        /^\*\*([SIF]-?[A-Z0-9-]*[A-Z0-9])\b[^*]*\*\*/.exec(line);
      if (m?.[1]) defined.add(m[1]);
    }
    const ids = hits(
      files,
      /\bS\d{2}\b|\bI-[A-Z0-9]+(?:-[A-Z0-9]+)*\b|\bF-[A-Z0-9]+(?:-[A-Z0-9]+)*\b/,
    );
    const undefinedIds = ids.filter((h) => !defined.has(h.text));
    expect(show(undefinedIds)).toEqual([]);
  });

  it(`every R0… names a design rule (${DESIGN} §1.2) or a test profile (${RELIABILITY_DOC} §3.5)`, () => {
    // Both documents define their R-names in bold: `- **R1 Races end at a constraint…**` and
    // `| **R0** unit races |`. F-R8 and the like are findings, checked above.
    const defined = new Set<string>();
    for (const doc of [DESIGN, RELIABILITY_DOC]) {
      for (const m of read(doc).matchAll(/^(?:-|\|)\s*\*\*(R\d+)\b/gm)) defined.add(m[1] ?? '');
    }
    expect(defined).toEqual(new Set(['R0', 'R1', 'R2', 'R3', 'R4', 'R5', 'R6']));
    const cited = hits(files, /(?<![\w-])R\d+\b/).filter((h) => !defined.has(h.text));
    expect(show(cited)).toEqual([]);
  });

  it(`the fault points of lib/runtime/fault-points.ts are the ones ${RELIABILITY_DOC} §3.3 lists`, () => {
    const declared = /export type FaultPointName =([^;]*);/.exec(
      read('lib/runtime/fault-points.ts'),
    );
    const inCode = [...(declared?.[1] ?? '').matchAll(/'([\w.]+)'/g)].map((m) => m[1]).sort();
    const row = read(RELIABILITY_DOC)
      .split(/\r?\n/)
      .find((line) => line.startsWith('| Code-level fault points'));
    const inDoc = [...(row ?? '').matchAll(/`([a-z]+\.[A-Za-z]+)`/g)].map((m) => m[1]).sort();
    expect(inCode.length).toBeGreaterThan(0);
    expect(inDoc).toEqual(inCode);
  });
});
