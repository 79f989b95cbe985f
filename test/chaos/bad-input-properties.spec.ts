import fc from 'fast-check';

import { DurableFsm, InvalidInputError, PayloadTooLargeError, Step, done } from '../../lib';
import { bootEngine, claimRows, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Bad input as properties (docs/reliability.md §6.6, S36 and S38): every value either round-trips
// faithfully or is refused with a typed error naming its path — never a silent coercion,
// never a generic TypeError, never a silent default. Seeds are printed; replay one with
// GD_PROPERTY_SEED=<seed>.

const SEED = Number(process.env['GD_PROPERTY_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env['GD_PROPERTY_RUNS'] ?? 150);

@DurableFsm({ name: 'carrier', queue: 'carrier' })
class CarrierFsm {
  @Step() start() {
    return done({});
  }
}

class Price {
  constructor(readonly cents: number) {}
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
 * function/symbol, undefined (but as an object property's value, which is absence), Map/Set,
 * typed array, sparse hole, cycle, or `\u0000`/lone
 * surrogate in a string or key, no Date or class instance (JSON would read it back as a string or
 * a plain object). `-0` is stored as 0: JSON's own semantics, documented in docs/reliability.md.
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
  // A Date or any class instance (boxed primitives included) would come back as a string or a
  // plain object: refused, never changed silently.
  const prototype: unknown = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && prototype !== Object.prototype && prototype !== null) return false;
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        if (!(i in value) || !faithful(value[i], seen)) return false;
      }
      return true;
    }
    if (Object.getOwnPropertySymbols(value).length > 0) return false;
    // An object property set to undefined is stored absent, as JSON writes it: it reads back
    // as undefined again (docs/design.md §26.8).
    return Object.entries(value).every(
      ([k, v]) =>
        v === undefined || (!k.includes('\u0000') && k.isWellFormed() && faithful(v, seen)),
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

  it('pinned: a cycle, a sparse hole, a typed array, a Date and class instances name their paths', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['me'] = cyclic;
    const cases: [Record<string, unknown>, string][] = [
      [{ a: { b: cyclic } }, 'insert.state.a.b.me'],

      [{ list: [1, , 3] }, 'insert.state.list[1]'],
      [{ list: [1, undefined] }, 'insert.state.list[1]'],
      [{ bytes: new Uint8Array([1, 2]) }, 'insert.state.bytes'],
      [{ order: { at: new Date(0) } }, 'insert.state.order.at'],
      [{ items: [{ price: new Price(3) }] }, 'insert.state.items[0].price'],
      [{ boxed: new String('x') }, 'insert.state.boxed'],
      [{ failure: new RangeError('lost') }, 'insert.state.failure'],
    ];
    for (const [state, path] of cases) {
      const outcome = await roundTrip(state);
      expect(outcome).toEqual({ error: expect.any(InvalidInputError) });
      expect((outcome as { error: InvalidInputError }).error.path).toBe(path);
    }
    const date = await roundTrip({ at: new Date(0) });
    expect((date as { error: Error }).error.message).toMatch(/is a Date, .*toISOString/);
    const price = await roundTrip({ price: new Price(3) });
    expect((price as { error: Error }).error.message).toMatch(/is an instance of Price/);
  });
});
