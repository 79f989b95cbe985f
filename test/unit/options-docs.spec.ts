import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { isDeepStrictEqual } from 'node:util';

import type { OptionDeclaration, OptionUnit } from '../../lib/options/option-declaration';
import { defaultValue, type OptionAtPath, optionPaths } from '../../lib/options/option-docs';

// The defaults the prose quotes — "`statementTimeout` (default 30 s)", "`schema`, default
// `public`" in docs/*.md and README.md, "Default 60 000." in the JSDoc of
// gen-durable-options.interface.ts — are the table's (lib/options/option-table.ts). A doc
// that quotes a stale default fails here with its file and line. No database.

const ROOT = join(__dirname, '..', '..');

// ---------------------------------------------------------------------------------------------
// Reading a quoted default: `30 000`, `30 s`, `1 MiB`, `'public'`, `{ interval: 30 000 }`, `false`

const UNIT_FACTORS: Record<OptionUnit, Record<string, number>> = {
  ms: {
    ms: 1,
    s: 1000,
    second: 1000,
    seconds: 1000,
    min: 60_000,
    minute: 60_000,
    minutes: 60_000,
    h: 3_600_000,
    hour: 3_600_000,
    hours: 3_600_000,
    day: 86_400_000,
    days: 86_400_000,
  },
  bytes: { B: 1, byte: 1, bytes: 1, KiB: 1024, MiB: 1024 * 1024, GiB: 1024 * 1024 * 1024 },
};
const UNIT_WORDS = [...new Set(Object.values(UNIT_FACTORS).flatMap((u) => Object.keys(u)))];

/** A number as prose writes it: digits in groups of three (space, thin or no-break space). */
const NUMBER = /^(?:\d{1,3}(?:[ \u00a0\u2009\u202f_]\d{3})+|\d+)(?:\.\d+)?/;
const UNIT = new RegExp(`^\\s*(${UNIT_WORDS.join('|')})\\b`);

type Quoted = unknown;

/** A tiny reader of the JS-like literals docs quote; `undefined` when `text` is not one. */
function readLiteral(text: string): { value: unknown; rest: string } | undefined {
  const s = text.trimStart();
  const num = NUMBER.exec(s);
  if (num) {
    const number = Number(num[0].replace(/[ \u00a0\u2009\u202f_]/g, ''));
    const after = s.slice(num[0].length);
    const unit = UNIT.exec(after);
    return unit
      ? { value: { number, unit: unit[1] }, rest: after.slice(unit[0].length) }
      : { value: { number }, rest: after };
  }
  if (s.startsWith("'")) {
    const end = s.indexOf("'", 1);
    return end < 0 ? undefined : { value: s.slice(1, end), rest: s.slice(end + 1) };
  }
  for (const [word, value] of [
    ['true', true],
    ['false', false],
  ] as const) {
    if (new RegExp(`^${word}\\b`).test(s)) return { value, rest: s.slice(word.length) };
  }
  if (s.startsWith('[') || s.startsWith('{')) {
    const isList = s.startsWith('[');
    const items: unknown[] = [];
    const fields: Record<string, unknown> = {};
    let rest = s.slice(1).trimStart();
    while (!rest.startsWith(isList ? ']' : '}')) {
      if (!isList) {
        const key = /^(\w+)\s*:/.exec(rest);
        if (!key) return undefined;
        rest = rest.slice(key[0].length);
        const field = readLiteral(rest);
        if (!field) return undefined;
        fields[key[1] ?? ''] = field.value;
        rest = field.rest.trimStart();
      } else {
        const item = readLiteral(rest);
        if (!item) return undefined;
        items.push(item.value);
        rest = item.rest.trimStart();
      }
      if (rest.startsWith(',')) rest = rest.slice(1).trimStart();
      else if (!rest.startsWith(isList ? ']' : '}')) return undefined;
    }
    return { value: isList ? items : fields, rest: rest.slice(1) };
  }
  const word = /^[\w#.-]+/.exec(s);
  return word ? { value: word[0], rest: s.slice(word[0].length) } : undefined;
}

/** `quoted` read as a value of `declaration` (units converted); undefined if it does not fit. */
function asValueOf(quoted: Quoted, declaration: OptionDeclaration<unknown>): unknown {
  if (typeof quoted === 'object' && quoted !== null && 'number' in quoted) {
    const { number, unit } = quoted as { number: number; unit?: string };
    if (unit === undefined) return number;
    const factor =
      declaration.unit === undefined ? undefined : UNIT_FACTORS[declaration.unit][unit];
    return factor === undefined ? `${number} ${unit}` : number * factor;
  }
  if (Array.isArray(quoted)) {
    return quoted.map((item) => asValueOf(item, declaration.entries?.declaration ?? declaration));
  }
  if (typeof quoted === 'object' && quoted !== null) {
    return Object.fromEntries(
      Object.entries(quoted).map(([k, v]) => {
        const field = declaration.fields?.[k] ?? declaration.entries?.declaration;
        return [k, field === undefined ? v : asValueOf(v, field)];
      }),
    );
  }
  return quoted;
}

/**
 * What is wrong with `statement` (the text after "default") as the default of `option`, or
 * undefined when it agrees with the table.
 */
function problemWith(option: OptionAtPath, statement: string): string | undefined {
  const { declaration, path } = option;
  const backticked = /^\s*`([^`]*)`/.exec(statement);
  const quotedText = backticked ? (backticked[1] ?? '') : statement;
  switch (declaration.default.kind) {
    case 'required':
      return `${path} is required, but the text gives it a default (${statement.trim()})`;
    case 'computed': {
      // The backticked word, else the words up to the clause's end, must be how the table says it.
      const said = backticked ? quotedText : (/^[^,;().\n]*/.exec(statement)?.[0] ?? '');
      const text = declaration.default.text.replace(/`/g, '').toLowerCase();
      return said.trim() !== '' && text.includes(said.trim().toLowerCase())
        ? undefined
        : `${path} defaults to "${declaration.default.text}", the text says ${statement.trim()}`;
    }
    case 'value': {
      const read = readLiteral(quotedText);
      const expected = defaultValue(declaration, path);
      const found = read === undefined ? undefined : asValueOf(read.value, declaration);
      return isDeepStrictEqual(found, expected)
        ? undefined
        : `${path} defaults to ${JSON.stringify(expected)}, the text says ${statement.trim()} (read as ${JSON.stringify(found)})`;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Finding the mentions

const PATHS = optionPaths().filter((p) => p.name !== '*');
const BY_PATH = new Map(PATHS.map((p) => [p.path, p]));

/**
 * The option a backticked name in prose stands for: a top-level option or a dotted path
 * (`gc.retention`), or the last name of a nested option (`shards`) when every nested option of
 * that name has the same default. Anything else (`maxAttempts`, `priority`) is not an option.
 */
function optionNamed(name: string): OptionAtPath | undefined {
  const exact = BY_PATH.get(name);
  if (exact) return exact;
  const nested = PATHS.filter((p) => p.name === name && p.path.includes('.'));
  const first = nested[0];
  if (first === undefined) return undefined;
  const same = nested.every(
    (p) =>
      p.declaration.default.kind === first.declaration.default.kind &&
      (p.declaration.default.kind !== 'value' ||
        isDeepStrictEqual(
          defaultValue(p.declaration, p.path),
          defaultValue(first.declaration, first.path),
        )),
  );
  return same ? first : undefined;
}

interface Mention {
  readonly where: string;
  readonly option: OptionAtPath;
  readonly statement: string;
}

/**
 * "`name` (default V", "`name`, default V", "`name` defaults to V", "`name` ms (default V" — a
 * backticked option, at most one word, then "default". Table rows are skipped: they are the
 * README's (checked against the table itself) or say what a mechanism's removal does.
 */
const MENTION =
  /`([A-Za-z][\w.]*)`(?:\s+[a-z]+)?\s*[(,]?\s*\bdefaults?\b(?:\s+(?:to|is)\b|:)?\s*([^\n]*(?:\n[^\n|]*)?)/g;

function mentionsIn(file: string, text: string): Mention[] {
  const prose = text
    .split('\n')
    .map((line) => (line.trimStart().startsWith('|') ? '' : line))
    .join('\n');
  const out: Mention[] = [];
  for (const match of prose.matchAll(MENTION)) {
    const option = optionNamed(match[1] ?? '');
    if (option === undefined) continue;
    const line = prose.slice(0, match.index).split('\n').length;
    out.push({ where: `${file}:${line}`, option, statement: match[2] ?? '' });
  }
  return out;
}

function docFiles(): { file: string; text: string }[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs].map((file) => ({
    file,
    text: readFileSync(join(ROOT, file), 'utf8'),
  }));
}

// ---------------------------------------------------------------------------------------------
// The JSDoc of the public option interfaces

/** Which option path each public options interface documents. */
const INTERFACE_PATHS: Record<string, string> = {
  GenDurableOptions: '',
  FlusherOptions: 'flushers[]',
  ReaperOptions: 'reaper',
  GcOptions: 'gc',
  PriorityAgingOptions: 'priorityAging',
  AwaitOptions: 'await',
  InsertBatcherOptions: 'insertBatcher',
  RateLimitOptions: 'rateLimits.*',
  ConcurrencyLimitOptions: 'concurrencyLimits.*',
};

interface DocumentedField {
  readonly path: string;
  readonly comment: string;
}

/** Every JSDoc'd field of the interfaces in INTERFACE_PATHS, with its option path. */
function documentedFields(source: string): DocumentedField[] {
  const out: DocumentedField[] = [];
  for (const block of source.matchAll(/export interface (\w+)[^{]*\{([\s\S]*?)\n\}/g)) {
    const prefix = INTERFACE_PATHS[block[1] ?? ''];
    if (prefix === undefined) continue;
    for (const field of (block[2] ?? '').matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\??:/g)) {
      const comment = (field[1] ?? '')
        .replace(/^\s*\*\s?/gm, ' ')
        .replace(/\s+/g, ' ')
        .trim();
      const name = field[2] ?? '';
      out.push({ path: prefix === '' ? name : `${prefix}.${name}`, comment });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

describe('the defaults quoted in docs/*.md and README.md are the table’s', () => {
  const mentions = docFiles().flatMap(({ file, text }) => mentionsIn(file, text));

  it('finds the options the docs quote a default for', () => {
    // The scan reads real mentions (if this drops to zero the pattern broke, not the docs).
    expect(mentions.length).toBeGreaterThan(0);
  });

  it('every quoted default agrees with the table', () => {
    const problems = mentions
      .map((m) => ({ where: m.where, problem: problemWith(m.option, m.statement) }))
      .filter((p) => p.problem !== undefined);
    expect(problems).toEqual([]);
  });

  it.each([
    ['`leaseTtl` (default 60 s)', undefined],
    ['`leaseTtl` (default 60 000 ms)', undefined],
    ['`leaseTtl` (default 30 s)', 'leaseTtl defaults to 60000'],
    ['`statementTimeout` (default 30 s; finding F-R7)', undefined],
    ['`maxStateBytes` (default 1 MiB)', undefined],
    ['`maxStateBytes` (default 1 KiB)', 'maxStateBytes defaults to 1048576'],
    ['`schema`, default `public`', undefined],
    ['`schema`, default `jobs`', 'schema defaults to "public"'],
    ['`await.tick` ms (default 25)', undefined],
    ['`reaper.maxReaps`, default 5', undefined],
    ['`reaper.maxReaps`, default 3', 'reaper.maxReaps defaults to 5'],
    ['`reaper` (default `{ interval: 30 000, maxReaps: 5 }`)', undefined],
    ['`reaper` (default `{ interval: 30 000, maxReaps: 3 }`)', 'reaper defaults to'],
    ['(`shards`, default 1, at most `limit`)', undefined],
    ['(`shards`, default 2)', 'rateLimits.*.shards defaults to 1'],
    ['`burst` tokens\n(default `allowed`)', undefined],
    ['`nodeId` (default: `GEN_DURABLE_NODE_ID`, else the hostname)', undefined],
    ['`nodeId` defaults to `hostname#pid`', 'nodeId defaults to "`GEN_DURABLE_NODE_ID` or'],
    ['`nodeId` (default the hostname (or `GEN_DURABLE_NODE_ID`))', undefined],
    ['`nodeId` (default the process id)', 'nodeId defaults to'],
    ['`dataSource` (default none)', 'dataSource is required'],
    ['`preparedStatements` (default `false`)', 'preparedStatements defaults to true'],
    ['`maxAttempts` (default 20)', undefined],
    ['| `nodeId` | defaults to `hostname#pid` |', undefined],
  ] as const)('the scan reads %p', (text, problem) => {
    const found = mentionsIn('example.md', text).map((m) => problemWith(m.option, m.statement));
    if (problem === undefined) expect(found.filter((p) => p !== undefined)).toEqual([]);
    else expect(found).toEqual([expect.stringContaining(problem)]);
  });
});

describe('the JSDoc of gen-durable-options.interface.ts states the table’s defaults', () => {
  const source = readFileSync(
    join(ROOT, 'lib', 'options', 'gen-durable-options.interface.ts'),
    'utf8',
  );
  const fields = documentedFields(source);

  it('documents every option of the table with a JSDoc, and nothing the table lacks', () => {
    const documented = fields.map((f) => f.path).sort();
    const prefixes = Object.values(INTERFACE_PATHS);
    const declared = PATHS.filter((p) => {
      const parent = p.path.slice(0, Math.max(0, p.path.lastIndexOf('.')));
      return prefixes.includes(parent) && p.path !== 'isGlobal';
    })
      .map((p) => p.path)
      .sort();
    expect(documented).toEqual(declared);
  });

  it.each(fields.map((f) => [f.path, f] as const))('%s', (_path, { path, comment }) => {
    const option = BY_PATH.get(path);
    expect(option).toBeDefined();
    if (option === undefined) return;
    const statement = /\bdefault\b:?\s*([^\n]*)/i.exec(comment)?.[1];
    if (option.declaration.default.kind === 'required') {
      expect({ path, statesADefault: statement !== undefined }).toEqual({
        path,
        statesADefault: false,
      });
      return;
    }
    expect({ path, statesADefault: statement !== undefined }).toEqual({
      path,
      statesADefault: true,
    });
    expect({ path, problem: problemWith(option, statement ?? '') }).toEqual({
      path,
      problem: undefined,
    });
  });
});
