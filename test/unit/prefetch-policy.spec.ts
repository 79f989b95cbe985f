import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import { orderFairly, PrefetchPolicy } from '../../lib/runtime/prefetch-policy';

// docs/operations.md, "prefetch": with 'auto', running + prefetched = max(800, 4C) while steps
// average under 2 ms, max(200, 4C) under 50 ms, else nothing prefetched.

/** A policy whose moving average is `ms` (the first step sets it). */
function averaging(ms: number | undefined, concurrency = 10): PrefetchPolicy {
  const policy = new PrefetchPolicy('auto', 'auto', concurrency);
  if (ms !== undefined) policy.recordStep(ms);
  return policy;
}

describe('PrefetchPolicy', () => {
  it("'auto' follows the average step: max(800, 4C) under 2 ms, max(200, 4C) under 50 ms, else none", () => {
    expect(averaging(undefined).prefetch()).toBe(0);
    expect(averaging(0.2).prefetch()).toBe(790);
    expect(averaging(1.99).prefetch()).toBe(790);
    expect(averaging(2).prefetch()).toBe(190);
    expect(averaging(49).prefetch()).toBe(190);
    expect(averaging(50).prefetch()).toBe(0);
    expect(averaging(0.2).max()).toBe(790);
    // 4 × concurrency wins over the floors for a wide queue.
    expect(averaging(0.2, 300).prefetch()).toBe(900);
    expect(averaging(10, 300).prefetch()).toBe(900);
  });

  it('the average moves by a fifth of each new step', () => {
    const policy = averaging(1);
    policy.recordStep(101); // 1 + 100 × 0.2 = 21 ms: short, not trivial
    expect(policy.prefetch()).toBe(190);
    for (let k = 0; k < 20; k++) policy.recordStep(100);
    expect(policy.prefetch()).toBe(0);
  });

  it("minDemand 'auto' is half the capacity while prefetching, else 1; numbers are taken as given", () => {
    expect(averaging(undefined).minDemand()).toBe(1);
    expect(averaging(0.2).minDemand()).toBe(400);
    expect(averaging(10).minDemand()).toBe(100);
    const fixed = new PrefetchPolicy(5, 3, 10);
    fixed.recordStep(0.1);
    expect([fixed.prefetch(), fixed.max(), fixed.minDemand()]).toEqual([5, 5, 3]);
  });

  it("sheds only with 'auto', once every slot runs, steps are long and rows are buffered", () => {
    expect(averaging(60).shouldShed(10, 5)).toBe(true);
    expect(averaging(60).shouldShed(9, 5)).toBe(false);
    expect(averaging(60).shouldShed(10, 0)).toBe(false);
    expect(averaging(10).shouldShed(10, 5)).toBe(false);
    expect(new PrefetchPolicy(0, 1, 10).shouldShed(10, 5)).toBe(false);
  });

  it('a fair queue keeps a quarter of the prefetch, at most concurrency, for pokes', () => {
    expect(averaging(10, 20).pokeReserve()).toBe(20); // prefetch 180: min(20, 45)
    expect(averaging(10, 100).pokeReserve()).toBe(75); // prefetch 300: min(100, 75)
    expect(averaging(undefined, 20).pokeReserve()).toBe(0); // no prefetch, no reserve
    expect(new PrefetchPolicy(8, 4, 2).pokeReserve()).toBe(2);
    expect(new PrefetchPolicy(0, 1, 10).pokeReserve()).toBe(0);
  });

  it("keeps slots for new keys: 'auto' is 1 from concurrency 10, numbers at most C − 1, none without prefetch", () => {
    const auto = (concurrency: number, ms: number | undefined): number => {
      const policy = new PrefetchPolicy('auto', 'auto', concurrency, 'auto');
      if (ms !== undefined) policy.recordStep(ms);
      return policy.newKeySlots();
    };
    expect(auto(20, 10)).toBe(1);
    expect(auto(10, 10)).toBe(1);
    expect(auto(9, 10)).toBe(0);
    expect(auto(20, 60)).toBe(0); // long steps: no prefetch, every slot for any key
    expect(auto(20, undefined)).toBe(0); // no step yet: no prefetch
    expect(new PrefetchPolicy(8, 4, 3, 1).newKeySlots()).toBe(1);
    expect(new PrefetchPolicy(8, 4, 3, 5).newKeySlots()).toBe(2);
    expect(new PrefetchPolicy(8, 4, 1, 'auto').newKeySlots()).toBe(0);
    expect(new PrefetchPolicy(0, 1, 20, 3).newKeySlots()).toBe(0);
    expect(new PrefetchPolicy(8, 4, 20).newKeySlots()).toBe(0); // the constructor's default
  });
});

describe('orderFairly', () => {
  const row = (id: string, key: string | null): ClaimedRow =>
    ({ id, fairnessKey: key }) as unknown as ClaimedRow;
  const ids = (rows: readonly ClaimedRow[]): string => rows.map((r) => r.id).join(' ');

  it('a key with nothing buffered goes after the first row of each buffered key', () => {
    const buffer = ['a1', 'a2', 'a3', 'a4'].map((id) => row(id, 'A'));
    expect(ids(orderFairly(buffer, [row('a5', 'A'), row('b1', 'B')]))).toBe('a1 b1 a2 a3 a4 a5');
  });

  it('interleaves keys by rounds; rows without a key are one key', () => {
    const buffer = [row('a1', 'A'), row('a2', 'A'), row('b1', 'B')];
    const got = orderFairly(buffer, [row('b2', 'B'), row('n1', null), row('n2', null)]);
    expect(ids(got)).toBe('a1 b1 n1 a2 b2 n2');
    // A buffer in this order keeps it when rows join.
    expect(ids(orderFairly(got, []))).toBe(ids(got));
  });

  it('keeps one key in claim order', () => {
    const buffer = ['a1', 'a2'].map((id) => row(id, 'A'));
    expect(ids(orderFairly(buffer, [row('a3', 'A')]))).toBe('a1 a2 a3');
  });
});
