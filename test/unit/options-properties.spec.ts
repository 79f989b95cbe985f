import fc from 'fast-check';

import { ConfigurationError, type GenDurableOptions } from '../../lib';
import { resolveOptions } from '../../lib/options/resolve-options';

// Options as a property (S38 in docs/reliability.md): every option record either resolves with the values
// given or is refused with a ConfigurationError naming the option — never a silent default.
// The seed is printed; replay one with GD_PROPERTY_SEED=<seed>. State values as a property
// (S36) go through the database: test/chaos/bad-input-properties.spec.ts.

const SEED = Number(process.env['GD_PROPERTY_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env['GD_PROPERTY_RUNS'] ?? 150);

/** Option value generators: valid integers and every kind of junk. */
const junk = fc.oneof(
  fc.constant(-1),
  fc.constant(0.5),
  fc.constant(Number.NaN),
  fc.constant(Number.POSITIVE_INFINITY),
  fc.constant('100'),
  fc.constant(null),
  fc.constant(true),
  fc.constant({}),
  fc.constant([]),
);

/** Integer timings and counts: name → minimum accepted (docs/design.md §22). */
const INTEGERS: Record<string, number> = {
  leaseTtl: 1,
  heartbeatInterval: 1,
  pollInterval: 1,
  maxPollInterval: 1,
  drainTimeout: 0,
  statementTimeout: 1,
  maxStateBytes: 1,
  prefetch: 0,
  minDemand: 1,
};

const FAKE_DATA_SOURCE = {
  options: { type: 'postgres' },
  isInitialized: true,
} as unknown as GenDurableOptions['dataSource'];

describe('S38: options as a property — a valid config or a ConfigurationError naming the option', () => {
  it(`${RUNS} random option records`, () => {
    process.stdout.write(`[properties] options seed ${SEED}\n`);
    const value = fc.oneof(fc.integer({ min: 0, max: 120_000 }), junk);
    const record = fc.record(
      {
        ...Object.fromEntries(Object.keys(INTEGERS).map((k) => [k, value])),
        preparedStatements: fc.oneof(fc.boolean(), fc.constant('no'), fc.constant(0)),
        poke: fc.constantFrom<unknown>(
          'local',
          'postgres',
          'none',
          'redis',
          42,
          { redis: 'redis://127.0.0.1:1' },
          { redis: 1 },
        ),
        reaper: fc.oneof(
          fc.constant(false),
          fc.record({ interval: value, maxReaps: value }, { requiredKeys: [] }),
        ),
        queues: fc.dictionary(fc.constantFrom('default', 'a', 'b'), value, { maxKeys: 2 }),
        bogus: fc.constant(1),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(record, (raw) => {
        const options = { dataSource: FAKE_DATA_SOURCE, ...raw } as unknown as GenDurableOptions;
        // The oracle: which provided keys are invalid on their own.
        const invalid: string[] = [];
        for (const [key, min] of Object.entries(INTEGERS)) {
          const v = (raw as Record<string, unknown>)[key];
          if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= min)) {
            invalid.push(key);
          }
        }
        if (raw.preparedStatements !== undefined && typeof raw.preparedStatements !== 'boolean') {
          invalid.push('preparedStatements');
        }
        if (raw.poke !== undefined && !['local', 'postgres', 'none'].includes(raw.poke as string)) {
          const redis: unknown =
            typeof raw.poke === 'object' && raw.poke !== null
              ? (raw.poke as Record<string, unknown>)['redis']
              : undefined;
          if (typeof redis !== 'string') invalid.push('poke');
        }
        if (raw.reaper !== undefined && raw.reaper !== false) {
          for (const [k, v] of Object.entries(raw.reaper)) {
            if (!(typeof v === 'number' && Number.isInteger(v) && v >= 1)) {
              invalid.push(`reaper.${k}`);
            }
          }
        }
        for (const [q, v] of Object.entries(raw.queues ?? {})) {
          if (!(typeof v === 'number' && Number.isInteger(v) && v >= 1)) {
            invalid.push(`queues.${q}`);
          }
        }
        if (raw.bogus !== undefined) invalid.push('options.bogus');
        let resolved: ReturnType<typeof resolveOptions> | undefined;
        let error: unknown;
        try {
          resolved = resolveOptions(options);
        } catch (err) {
          error = err;
        }
        if (error !== undefined) {
          // Only ever a ConfigurationError, naming a provided key (or the lease/heartbeat rule).
          expect(error).toBeInstanceOf(ConfigurationError);
          const path = (error as ConfigurationError).path;
          const named =
            invalid.some((k) => path === k || path.startsWith(`${k}.`)) ||
            path === 'heartbeatInterval' ||
            path === 'flushers';
          expect({ path, invalid, named }).toEqual({ path, invalid, named: true });
          return;
        }
        // Accepted: nothing invalid was provided (no silent default) and values were kept.
        expect(invalid).toEqual([]);
        for (const key of Object.keys(INTEGERS)) {
          const v = (raw as Record<string, unknown>)[key];
          if (v !== undefined && key !== 'maxPollInterval') {
            expect((resolved as unknown as Record<string, unknown>)[key]).toBe(v);
          }
        }
        if (raw.preparedStatements !== undefined) {
          expect(resolved!.preparedStatements).toBe(raw.preparedStatements);
        }
      }),
      { numRuns: RUNS * 4, seed: SEED },
    );
  });

  it.each([
    ['preparedStatements', 'no'],
    ['preparedStatements', 0],
    ['leaseTtl', -5000],
    ['heartbeatInterval', 1.5],
    ['drainTimeout', Number.NaN],
  ] as const)('pinned: %s = %p alone is refused, naming it', (key, value) => {
    const err = (() => {
      try {
        resolveOptions({ dataSource: FAKE_DATA_SOURCE, [key]: value });
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigurationError);
    expect((err as ConfigurationError).path).toBe(key);
  });
});
