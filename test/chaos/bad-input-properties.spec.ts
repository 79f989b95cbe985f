import fc from 'fast-check';

import {
  ConfigurationError,
  DurableFsm,
  InvalidInputError,
  PayloadTooLargeError,
  Step,
  done,
} from '../../lib';
import type { GenDurableOptions } from '../../lib';
import { resolveOptions } from '../../lib/options/resolve-options';
import { bootEngine, claimRows, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Bad input as properties (docs/reliability.md §6.6, S36 and S38): every value either round-trips
// faithfully or is refused with a typed error naming its path — never a silent coercion,
// never a generic TypeError, never a silent default. Seeds are printed; replay one with
// GD_PROPERTY_SEED=<seed>.

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

@DurableFsm({ name: 'carrier', queue: 'carrier' })
class CarrierFsm {
  @Step() start() {
    return done({});
  }
}

/** Strings mixing ordinary characters with the ones jsonb refuses (docs/reliability.md §6.6). */
const nasty = fc.string({
  unit: fc.oneof(
    fc.constantFrom('\u0000', '\ud800', '\udfff', '\u00e9', '"', '\\'),
    fc.string({ minLength: 1, maxLength: 1 }),
  ),
});

/**
 * Whether JSON (and so jsonb) holds `value` faithfully: no bigint, non-finite number,
 * undefined/function/symbol, Map/Set, typed array, sparse hole, cycle, or `\u0000`/lone
 * surrogate in a string or key. `toJSON` objects (Date) are stored through `toJSON`, and
 * `-0` is stored as 0: both are JSON's own semantics, documented in docs/reliability.md.
 */
function faithful(value: unknown, seen = new Set<object>()): boolean {
  switch (typeof value) {
    case 'string':
      return !value.includes('\u0000') && value.isWellFormed();
    case 'number':
      return Number.isFinite(value);
    case 'boolean':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (seen.has(value)) return false;
  if (
    value instanceof Map ||
    value instanceof Set ||
    ArrayBuffer.isView(value) ||
    value instanceof ArrayBuffer
  ) {
    return false;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return faithful((value as { toJSON: () => unknown }).toJSON(), seen);
  }
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        if (!(i in value) || !faithful(value[i], seen)) return false;
      }
      return true;
    }
    if (Object.getOwnPropertySymbols(value).length > 0) return false;
    return Object.entries(value).every(
      ([k, v]) => !k.includes('\u0000') && k.isWellFormed() && faithful(v, seen),
    );
  } finally {
    seen.delete(value);
  }
}

describe('S36: state values as a property — a faithful round trip or a typed error naming the path', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [CarrierFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
      maxStateBytes: 64 * 1024,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  let claimed = 0;
  async function roundTrip(
    state: Record<string, unknown>,
  ): Promise<{ stored: unknown } | { error: unknown }> {
    try {
      const id = await h.engine.insert(CarrierFsm, { state });
      const [row] = await claimRows(h.engine, 'carrier', 1, `carrier-${++claimed}`);
      expect(row?.id).toBe(id);
      return { stored: row!.state };
    } catch (error) {
      return { error };
    }
  }

  const check = (
    value: Record<string, unknown>,
    outcome: { stored: unknown } | { error: unknown },
  ): void => {
    if (faithful(value)) {
      expect(outcome).toEqual({ stored: JSON.parse(JSON.stringify(value)) as unknown });
      return;
    }
    expect('error' in outcome).toBe(true);
    const error = (outcome as { error: unknown }).error;
    expect(error instanceof InvalidInputError || error instanceof PayloadTooLargeError).toBe(true);
    expect((error as InvalidInputError).path.startsWith('insert.state')).toBe(true);
  };

  it(`${RUNS} JSON values (with strings jsonb refuses) through insert → claim`, async () => {
    process.stdout.write(`[properties] json seed ${SEED}\n`);
    const json = fc.dictionary(fc.oneof(fc.string(), nasty), fc.jsonValue({ maxDepth: 3 }));
    const withNasty = fc.dictionary(
      fc.string(),
      fc.oneof(nasty, fc.array(nasty, { maxLength: 3 })),
      { maxKeys: 3 },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(json, withNasty), async (value) =>
        check(value, await roundTrip(value)),
      ),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it(`${RUNS} arbitrary JS values (bigint, Map, Set, Date, typed arrays, sparse arrays, cycles) through insert → claim`, async () => {
    process.stdout.write(`[properties] anything seed ${SEED}\n`);
    const anything = fc.anything({
      maxDepth: 3,
      withBigInt: true,
      withMap: true,
      withSet: true,
      withDate: true,
      withTypedArray: true,
      withSparseArray: true,
      withNullPrototype: true,
      withObjectString: true,
    });
    const value = fc.dictionary(fc.string(), anything, { maxKeys: 4 });
    await fc.assert(
      fc.asyncProperty(value, async (v) => check(v, await roundTrip(v))),
      { numRuns: RUNS, seed: SEED },
    );
  });

  it('pinned: a cycle, a sparse hole and a typed array name their paths', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['me'] = cyclic;
    const cases: [Record<string, unknown>, string][] = [
      [{ a: { b: cyclic } }, 'insert.state.a.b.me'],

      [{ list: [1, , 3] }, 'insert.state.list[1]'],
      [{ bytes: new Uint8Array([1, 2]) }, 'insert.state.bytes'],
    ];
    for (const [state, path] of cases) {
      const outcome = await roundTrip(state);
      expect(outcome).toEqual({ error: expect.any(InvalidInputError) });
      expect((outcome as { error: InvalidInputError }).error.path).toBe(path);
    }
  });
});
