import { arrayLiteral, withArrayLiterals } from '../../lib/db/array-literal';

// lib/db/array-literal.ts: the executor sends array parameters as literals it built with one
// join each; each must read back in PostgreSQL as the array `pg` would have sent.

describe('arrayLiteral', () => {
  it('plain strings: one join, every element quoted', () => {
    expect(arrayLiteral(['1', 'worker-a', '', 'NULL', '{}'])).toBe(
      '{"1","worker-a","","NULL","{}"}',
    );
  });

  it('escapes backslashes and double quotes; nulls unquoted', () => {
    expect(arrayLiteral(['{"a":1}', 'back\\slash', null, undefined])).toBe(
      '{"{\\"a\\":1}","back\\\\slash",NULL,NULL}',
    );
  });

  it('numbers, bigints and booleans as their text', () => {
    expect(arrayLiteral([0, 250, -1.5, 12n, true, false, null])).toBe(
      '{0,250,-1.5,12,true,false,NULL}',
    );
    expect(arrayLiteral([1, 2n, true, -0.5])).toBe('{1,2,true,-0.5}');
    expect(arrayLiteral([null, undefined, null])).toBe('{NULL,NULL,NULL}');
    expect(arrayLiteral([null])).toBe('{NULL}');
    expect(arrayLiteral([])).toBe('{}');
  });

  it('leaves dates, objects and nested arrays to pg', () => {
    const withDate = [null, new Date(0)];
    expect(arrayLiteral(withDate)).toBe(withDate);
    const nested = [['a']];
    expect(arrayLiteral(nested)).toBe(nested);
  });

  it('withArrayLiterals replaces top-level arrays only, and copies only then', () => {
    const values = ['q', 5, null];
    expect(withArrayLiterals(values)).toBe(values);
    expect(withArrayLiterals(['q', ['1', '2'], [1, null]])).toEqual(['q', '{"1","2"}', '{1,NULL}']);
  });
});
