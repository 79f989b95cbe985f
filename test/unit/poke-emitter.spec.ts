import { PokeEmitter } from '../../lib/runtime/poke-emitter';

// docs/design.md §16.4, §5.5: every poke reaches the local scheduler at once; the cross-node
// announcement goes out on the leading edge and further ones within the next 2 ms collapse
// into one trailing announcement, which opens the next window.

describe('PokeEmitter', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function emitter(): { e: PokeEmitter; local: string[]; remote: string[] } {
    const local: string[] = [];
    const remote: string[] = [];
    const e = new PokeEmitter(
      true,
      (q) => local.push(q),
      (q) => remote.push(q),
    );
    return { e, local, remote };
  }

  it('announces the first poke at once and a burst within 2 ms as one trailing announcement', () => {
    const { e, local, remote } = emitter();
    e.poke(['a']);
    expect(remote).toEqual(['a']);
    for (let i = 0; i < 3; i++) {
      jest.advanceTimersByTime(0.5);
      e.poke(['a']);
    }
    expect(local).toHaveLength(4);
    expect(remote).toEqual(['a']);
    jest.advanceTimersByTime(0.5);
    expect(remote).toEqual(['a', 'a']);
    // The trailing announcement opened a window: nothing more unless a poke falls in it.
    jest.advanceTimersByTime(2);
    expect(remote).toEqual(['a', 'a']);
    // A poke after the window is a new leading edge: at once.
    jest.advanceTimersByTime(50);
    e.poke(['a']);
    expect(remote).toEqual(['a', 'a', 'a']);
    e.close();
  });

  it('keeps one window per queue, and no trailing announcement when nothing followed', () => {
    const { e, remote } = emitter();
    e.poke(['a', 'b']);
    e.poke(['b']);
    expect(remote).toEqual(['a', 'b']);
    jest.advanceTimersByTime(2);
    expect(remote).toEqual(['a', 'b', 'b']);
    e.close();
  });

  it('a steady stream announces once per window; a trickle slower than the window, every poke at once', () => {
    const { e, remote } = emitter();
    // A poke every 0.5 ms for 10 ms: the leading one, then one per 2 ms window.
    for (let t = 0; t < 20; t++) {
      e.poke(['a']);
      jest.advanceTimersByTime(0.5);
    }
    jest.advanceTimersByTime(4);
    expect(remote).toHaveLength(6);
    remote.length = 0;
    // An insert every 3 ms, each waiting for the last to start: each announced at once.
    for (let t = 0; t < 5; t++) {
      e.poke(['a']);
      expect(remote).toHaveLength(t + 1);
      jest.advanceTimersByTime(3);
    }
    e.close();
  });

  it('announces nothing after close, and nothing at all when disabled', () => {
    const { e, remote } = emitter();
    e.poke(['a']);
    e.poke(['a']);
    e.close();
    jest.advanceTimersByTime(20);
    expect(remote).toEqual(['a']);
    const calls: string[] = [];
    const off = new PokeEmitter(
      false,
      (q) => calls.push(q),
      (q) => calls.push(q),
    );
    off.poke(['a']);
    expect(calls).toEqual([]);
  });
});
