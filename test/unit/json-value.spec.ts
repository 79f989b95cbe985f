import { InvalidInputError } from '../../lib/errors/invalid-input.error';
import { PayloadTooLargeError } from '../../lib/errors/payload-too-large.error';
import { toJsonObjectText, toJsonText } from '../../lib/serialization/json-value';

// The serializer of every jsonb value a step writes (docs/design.md §26.8): what it refuses,
// the path it names, and what it lets through (shared references are not cycles).
const text = (value: unknown): string => toJsonText(value, 'state', 1_000_000);
const refusal = (value: unknown): string => {
  try {
    text(value);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('toJsonText', () => {
  it('stores plain objects, arrays and primitives as JSON.stringify writes them', () => {
    const value = { a: 1, b: 'x', c: [true, null, { d: [] }], e: undefined };
    expect(text(value)).toBe(JSON.stringify(value));
    expect(text('plain')).toBe('"plain"');
    expect(text(null)).toBe('null');
    expect(text(Object.assign(Object.create(null) as object, { k: 1 }))).toBe('{"k":1}');
  });

  it('accepts one object reached twice (siblings, not a cycle)', () => {
    const shared = { n: 1 };
    expect(text({ a: shared, b: [shared, shared], c: { d: shared } })).toBe(
      '{"a":{"n":1},"b":[{"n":1},{"n":1}],"c":{"d":{"n":1}}}',
    );
  });

  it('refuses a cycle at any depth, naming where it closes', () => {
    const root: Record<string, unknown> = {};
    root['self'] = root;
    expect(refusal(root)).toMatch(/state\.self.*circular/);
    const deep: { a: { b: unknown[] } } = { a: { b: [] } };
    deep.a.b.push({ up: deep.a });
    expect(refusal(deep)).toMatch(/state\.a\.b\[0\]\.up.*circular/);
  });

  it('names the path of a bad primitive inside objects and arrays', () => {
    expect(refusal({ a: [1, { b: Number.NaN }] })).toMatch(/state\.a\[1\]\.b.*NaN/);
    expect(refusal({ a: [1, 2n] })).toMatch(/state\.a\[1\].*bigint/);
    expect(refusal({ s: 'a\u0000b' })).toMatch(/state\.s.*\\u0000/);
    expect(refusal({ f: () => 1 })).toMatch(/state\.f.*function/);
    expect(refusal([undefined])).toMatch(/state\[0\].*undefined/);
    expect(refusal([1, , 3])).toMatch(/state\[1\].*hole/);
    expect(refusal({ ['k\u0000']: 1 })).toMatch(/has a key/);
    expect(refusal({ d: new Date(0) })).toMatch(/state\.d.*Date/);
    expect(refusal({ m: new Map() })).toMatch(/state\.m.*Map/);
    expect(refusal({ u: new Uint8Array(2) })).toMatch(/state\.u.*Uint8Array/);
    class Point {
      x = 1;
    }
    expect(refusal({ p: new Point() })).toMatch(/state\.p.*instance of Point/);
    expect(refusal(undefined)).toMatch(/^.*state.*undefined/);
  });

  it('measures the stored text against the limit', () => {
    expect(() => toJsonText({ s: 'x'.repeat(100) }, 'state', 50)).toThrow(PayloadTooLargeError);
  });

  it('toJsonObjectText refuses what is not an object', () => {
    expect(() => toJsonObjectText([], 'result', 100)).toThrow(
      /must be a JSON object, got an array/,
    );
    expect(() => toJsonObjectText(null, 'result', 100)).toThrow(/got null/);
    expect(toJsonObjectText({}, 'result', 100)).toBe('{}');
  });
});
