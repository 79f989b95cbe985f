import { ChurnMap } from '../../lib/util/churn-map';

// ChurnMap (lib/util/churn-map.ts): a Map's answers for entries that come and go once per
// step, across its rebuilds (every 512 removals).
describe('ChurnMap', () => {
  it('answers as a Map through removals, re-additions and rebuilds', () => {
    const map = new ChurnMap<{ n: number }>();
    const model = new Map<string, { n: number }>();
    let seed = 7;
    const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 5_000; i++) {
      const key = `k${Math.floor(random() * 300)}`;
      if (random() < 0.5) {
        const value = { n: i };
        map.set(key, value);
        model.set(key, value);
      } else {
        expect(map.delete(key)).toBe(model.delete(key));
      }
      expect(map.size).toBe(model.size);
      expect(map.has(key)).toBe(model.has(key));
      expect(map.get(key)).toBe(model.get(key));
    }
    expect([...map.values()]).toEqual([...model.values()]);
  });

  it('keeps insertion order and forgets removed keys', () => {
    const map = new ChurnMap<{ id: string }>();
    for (const id of ['a', 'b', 'c']) map.set(id, { id });
    expect(map.delete('b')).toBe(true);
    expect(map.delete('b')).toBe(false);
    expect(map.has('b')).toBe(false);
    expect(map.get('b')).toBeUndefined();
    map.set('d', { id: 'd' });
    expect([...map.values()].map((v) => v.id)).toEqual(['a', 'c', 'd']);
    for (let i = 0; i < 600; i++) {
      map.set(`x${i}`, { id: `x${i}` });
      map.delete(`x${i}`);
    }
    expect(map.size).toBe(3);
    expect([...map.values()].map((v) => v.id)).toEqual(['a', 'c', 'd']);
  });
});
