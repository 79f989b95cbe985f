import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { DataSource } from 'typeorm';

import { ConfigurationError } from '../../lib/errors/configuration.error';
import { GenDurableModule } from '../../lib/gen-durable.module';
import type { GenDurableOptions } from '../../lib/options/gen-durable-options.interface';
import {
  defaultValue,
  optionPaths,
  optionsTableRows,
  renderOptionsTable,
  TOP_LEVEL_OPTIONS,
} from '../../lib/options/option-docs';
import { isPlainObject } from '../../lib/options/option-declaration';
import { OPTION_TABLE } from '../../lib/options/option-table';
import { resolveOptions } from '../../lib/options/resolve-options';

// The option table (lib/options/option-table.ts) is the one declaration of every option: these
// tests check that each declaration is complete, that the resolver and the unknown-key checks
// follow it, and that README.md's Configuration table is the one the declarations render.
// No database: the DataSource is a stand-in that passes the PostgreSQL/initialized checks.

const ROOT = join(__dirname, '..', '..');
const DATA_SOURCE = {
  options: { type: 'postgres' },
  isInitialized: true,
} as unknown as DataSource;

/** The error `fn` throws (undefined if none). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err;
  }
}

function expectConfigurationError(fn: () => unknown, path: string): void {
  const err = thrown(fn);
  expect(err).toBeInstanceOf(ConfigurationError);
  expect({ path: (err as ConfigurationError).path }).toEqual({ path });
  expect((err as Error).message).toContain(path);
}

/** The cells of each row of the first table under `## Configuration` in README.md. */
function readmeTableRows(): string[][] {
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split(/\r?\n/);
  const start = lines.findIndex((l) => /^##\s+Configuration\s*$/.test(l));
  if (start < 0) throw new Error('README.md has no "## Configuration" section');
  const rows: string[][] = [];
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (/^##\s/.test(line)) break;
    if (!line.trimStart().startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    const cells = line
      .trim()
      .replace(/^\|/, '')
      .replace(/\|$/, '')
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
    rows.push(cells);
  }
  return rows;
}

describe('option table: every declaration is complete', () => {
  const paths = optionPaths();

  it('covers every option at every depth (top level, fields, entries)', () => {
    const names = paths.map((p) => p.path);
    expect(names).toEqual(expect.arrayContaining(['leaseTtl', 'gc.retention', 'await.tick']));
    expect(names).toEqual(
      expect.arrayContaining(['flushers[].maxBatch', 'rateLimits.*.burst', 'queues.*']),
    );
    expect(names).toContain('isGlobal');
  });

  it.each(optionPaths().map((p) => [p.path, p] as const))(
    '%s has a doc line and a default (or is required)',
    (_path, { path, declaration }) => {
      expect({ path, doc: declaration.doc.trim().length > 0 }).toEqual({ path, doc: true });
      expect(['value', 'computed', 'required']).toContain(declaration.default.kind);
      if (declaration.default.kind === 'computed') {
        expect(declaration.default.text.trim()).not.toBe('');
      }
      if (declaration.default.kind === 'value') {
        // The declared default passes the option's own validation.
        expect(() => defaultValue(declaration, path)).not.toThrow();
      }
    },
  );

  it('only dataSource is required at the top level', () => {
    const required = TOP_LEVEL_OPTIONS.filter(([, d]) => d.default.kind === 'required');
    expect(required.map(([name]) => name)).toEqual(['dataSource']);
  });
});

describe('option table: the resolver follows it', () => {
  it('resolveOptions({ dataSource }) is every declared default, deeply frozen', () => {
    const resolved = resolveOptions({ dataSource: DATA_SOURCE });
    expect(Object.keys(resolved)).toEqual(Object.keys(OPTION_TABLE));
    for (const [name, declaration] of Object.entries(OPTION_TABLE)) {
      if (name === 'dataSource') continue;
      expect({ name, value: resolved[name as keyof typeof resolved] }).toEqual({
        name,
        value: declaration.resolve(undefined, name, name),
      });
    }
    const unfrozen: string[] = [];
    const visit = (value: unknown, path: string): void => {
      if (typeof value !== 'object' || value === null || value === DATA_SOURCE) return;
      if (!Object.isFrozen(value)) unfrozen.push(path);
      for (const [k, v] of Object.entries(value)) visit(v, `${path}.${k}`);
    };
    visit(
      resolveOptions({
        dataSource: DATA_SOURCE,
        fsms: ['a'],
        insertBatcher: {},
        rateLimits: { r: { allowed: 5, period: [1, 'minute'] } },
        concurrencyLimits: { c: { limit: 3, shards: 9 } },
        flushers: [{ queues: ['default'] }],
      }),
      'options',
    );
    expect(unfrozen).toEqual([]);
  });

  it('resolves the derived values: rate, burst, clamped shards, the poll ceiling', () => {
    const resolved = resolveOptions({
      dataSource: DATA_SOURCE,
      rateLimits: { r: { allowed: 120, period: [1, 'minute'], shards: 0 } },
      concurrencyLimits: { c: { limit: 3, shards: 9 } },
      pollInterval: 8_000,
    });
    expect(resolved.rateLimits['r']).toEqual({ name: 'r', rate: 2, burst: 120, shards: 1 });
    expect(resolved.concurrencyLimits['c']).toEqual({ name: 'c', limit: 3, shards: 3 });
    expect(resolved.maxPollInterval).toBe(8_000);
  });

  it('accepts every declared top-level key with its default value', () => {
    for (const [name, declaration] of TOP_LEVEL_OPTIONS) {
      if (declaration.default.kind !== 'value') continue;
      const options = { dataSource: DATA_SOURCE, [name]: defaultValue(declaration, name) };
      expect({ name, err: thrown(() => resolveOptions(options as GenDurableOptions)) }).toEqual({
        name,
        err: undefined,
      });
    }
  });

  it('refuses an unknown key at the top level and in every component, naming its path', () => {
    const bad = (extra: Record<string, unknown>) => () =>
      resolveOptions({ dataSource: DATA_SOURCE, ...extra });
    expectConfigurationError(bad({ bogus: 1 }), 'options.bogus');
    const sections = TOP_LEVEL_OPTIONS.filter(([, d]) => d.fields !== undefined);
    expect(sections.map(([name]) => name)).toEqual([
      'callbacks',
      'await',
      'reaper',
      'gc',
      'priorityAging',
      'stats',
      'schedules',
      'insertBatcher',
      'otel',
    ]);
    for (const [name] of sections) {
      expectConfigurationError(bad({ [name]: { bogus: 1 } }), `${name}.bogus`);
    }
    expectConfigurationError(bad({ flushers: [{ bogus: 1 }] }), 'flushers[0].bogus');
    expectConfigurationError(
      bad({ rateLimits: { r: { allowed: 1, period: 1, bogus: 1 } } }),
      'rateLimits.r.bogus',
    );
    expectConfigurationError(
      bad({ concurrencyLimits: { c: { limit: 1, bogus: 1 } } }),
      'concurrencyLimits.c.bogus',
    );
    expectConfigurationError(bad({ poke: { redis: 'redis://x', db: 1 } }), 'poke.db');
  });

  it('refuses wrong shapes that used to pass unchecked, naming the option', () => {
    const bad = (extra: Record<string, unknown>) => () =>
      resolveOptions({ dataSource: DATA_SOURCE, ...extra });
    expectConfigurationError(bad({ rateLimits: 5 }), 'rateLimits');
    expectConfigurationError(bad({ fsms: 'Orders' }), 'fsms');
    expectConfigurationError(bad({ isGlobal: 'yes' }), 'isGlobal');
    expectConfigurationError(bad({ queues: { a: undefined } }), 'queues.a');
    expectConfigurationError(bad({ insertBatcher: { durable: 'yes' } }), 'insertBatcher.durable');
    expectConfigurationError(bad({ rateLimits: { r: { period: 1 } } }), 'rateLimits.r.allowed');
    expectConfigurationError(
      bad({ rateLimits: { r: { allowed: 1, period: [1, 'week'] } } }),
      'rateLimits.r.period[1]',
    );
    expectConfigurationError(
      bad({ concurrencyLimits: { c: { limit: 0 } } }),
      'concurrencyLimits.c.limit',
    );
    expectConfigurationError(() => resolveOptions({} as GenDurableOptions), 'dataSource');
  });

  it('checks a computed default like a given value (an empty GEN_DURABLE_NODE_ID is refused)', () => {
    const saved = process.env['GEN_DURABLE_NODE_ID'];
    try {
      process.env['GEN_DURABLE_NODE_ID'] = '';
      expectConfigurationError(() => resolveOptions({ dataSource: DATA_SOURCE }), 'nodeId');
    } finally {
      if (saved === undefined) delete process.env['GEN_DURABLE_NODE_ID'];
      else process.env['GEN_DURABLE_NODE_ID'] = saved;
    }
  });
});

describe("README.md's Configuration table is rendered from the table", () => {
  it('has one row per option, in table order, with the declared default and doc line', () => {
    const [header, separator, ...rows] = readmeTableRows();
    const expected = optionsTableRows().map((r) => [...r]);
    const hint =
      'README.md is out of date with lib/options/option-table.ts; replace its Configuration ' +
      `table with this one and run npx prettier --write README.md:\n\n${renderOptionsTable()}`;
    expect(header).toEqual(['Option', 'Default', 'Meaning']);
    expect(separator?.every((c) => /^-+$/.test(c))).toBe(true);
    if (JSON.stringify(rows) !== JSON.stringify(expected)) {
      process.stderr.write(`${hint}\n`);
    }
    expect(rows).toEqual(expected);
  });

  it('renders defaults from the declarations, not from text', () => {
    const byName = new Map(optionsTableRows().map(([name, def, doc]) => [name, [def, doc]]));
    expect(byName.get('`reaper`')?.[0]).toBe('`{ interval: 30000, maxReaps: 5 }`');
    expect(byName.get('`flushers`')?.[0]).toBe(
      "`[{ queues: 'all', maxBatch: 500, maxDelayMs: 0 }]`",
    );
    expect(byName.get('`insertBatcher`')?.[1]).toMatch(
      /^`\{ maxBatch: 1000, maxDelayMs: 100, maxBuffer: 10000, durable: true \}` for/,
    );
    expect(byName.get('`limiter`')?.[1]).toContain('url \\| ioredisOptions');
    expect(isPlainObject(defaultValue(OPTION_TABLE.gc, 'gc'))).toBe(true);
  });
});

describe('the module reads isGlobal from the table', () => {
  it('defaults to a global module, honours false and refuses a truthy non-boolean', () => {
    expect(GenDurableModule.forRoot({ dataSource: DATA_SOURCE }).global).toBe(true);
    expect(GenDurableModule.forRoot({ dataSource: DATA_SOURCE, isGlobal: false }).global).toBe(
      false,
    );
    const options = { dataSource: DATA_SOURCE, isGlobal: 'no' } as unknown as GenDurableOptions;
    expectConfigurationError(() => GenDurableModule.forRoot(options), 'isGlobal');
  });
});
