import { WakeUps } from '../../lib/runtime/wake-ups';

// docs/design.md §27.4: local wake-ups, on Jest's fake clock (timers and Date.now).

describe('WakeUps', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('wakes each queue once its due time passed, earliest first, with one timer per queue', () => {
    const woken: string[] = [];
    const w = new WakeUps(50_000, (q) => woken.push(`${q}@${Date.now() - 1_000_000}`));
    expect(w.arm('a', 300)).toBe(true);
    expect(w.arm('a', 100)).toBe(true);
    expect(w.arm('b', 200)).toBe(true);
    expect(jest.getTimerCount()).toBe(2);
    jest.advanceTimersByTime(99);
    expect(woken).toEqual([]);
    jest.advanceTimersByTime(300);
    expect(woken).toEqual(['a@105', 'b@205', 'a@305']);
    expect(w.pending('a') + w.pending('b')).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('due times within 5 ms share one wake-up', () => {
    const woken: number[] = [];
    const w = new WakeUps(50_000, () => woken.push(Date.now()));
    for (let i = 0; i < 4; i++) w.arm('a', 200 + i);
    expect(w.pending('a')).toBe(1);
    jest.advanceTimersByTime(1_000);
    expect(woken).toHaveLength(1);
  });

  it('arms nothing for 0, beyond the horizon, or after close; close clears its timers', () => {
    const woken: string[] = [];
    const w = new WakeUps(1_000, (q) => woken.push(q));
    expect(w.arm('a', 0)).toBe(false);
    expect(w.arm('a', 1_001)).toBe(false);
    expect(w.arm('a', 1_000)).toBe(true);
    w.close();
    expect(jest.getTimerCount()).toBe(0);
    expect(w.arm('a', 10)).toBe(false);
    jest.advanceTimersByTime(5_000);
    expect(woken).toEqual([]);
  });

  it('keeps at most 1 000 pending per queue: the latest is left to the poll', () => {
    const w = new WakeUps(1_000_000, () => undefined);
    for (let i = 1; i <= 1_000; i++) expect(w.arm('a', i * 10)).toBe(true);
    expect(w.arm('a', 20_000)).toBe(false);
    expect(w.arm('a', 3)).toBe(true); // earlier than all: kept, the latest dropped
    expect(w.pending('a')).toBe(1_000);
  });
});
