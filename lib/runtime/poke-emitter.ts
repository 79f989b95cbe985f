/**
 * The coalescing window of cross-node announcements, ms: the local schedulers' own poke
 * debounce (docs/design.md §5.5). A receiving scheduler coalesces pokes within this window
 * anyway, so announcing more often would buy nothing, and announcing less often would delay
 * the second insert of a burst by up to the window (with the former 100 ms, a cross-process
 * insert→start p99 of ≈ 100 ms; docs/performance.md).
 */
const ANNOUNCE_WINDOW_MS = 10;

/**
 * Per-engine poke emitter (docs/design.md §16.4, §5.5). Every poke reaches the local schedulers
 * of its queue at once: they debounce themselves (a scheduler with free slots picks on the
 * leading edge and coalesces further pokes within 10 ms; one with no free slot drops them), so
 * insert → step start stays one round trip. The cross-node leg is announced on the leading edge
 * too: per queue, the first announcement goes out at once, and further ones within the next
 * 10 ms collapse into one trailing announcement at the window's end (at most two a window, however
 * many inserts).
 */
export class PokeEmitter {
  private readonly windows = new Map<string, { timer: NodeJS.Timeout; trailing: boolean }>();
  private closed = false;

  constructor(
    private readonly enabled: boolean,
    private readonly local: (queue: string) => void,
    private readonly remote: ((queue: string) => void) | undefined,
  ) {}

  poke(queues: Iterable<string>): void {
    if (!this.enabled || this.closed) return;
    for (const queue of queues) {
      this.local(queue);
      if (this.remote) this.announce(queue, this.remote);
    }
  }

  close(): void {
    this.closed = true;
    for (const w of this.windows.values()) clearTimeout(w.timer);
    this.windows.clear();
  }

  private announce(queue: string, remote: (queue: string) => void): void {
    const window = this.windows.get(queue);
    if (window) {
      window.trailing = true;
      return;
    }
    const timer = setTimeout(() => {
      const w = this.windows.get(queue);
      this.windows.delete(queue);
      if (w?.trailing && !this.closed) remote(queue);
    }, ANNOUNCE_WINDOW_MS);
    this.windows.set(queue, { timer, trailing: false });
    remote(queue);
  }
}
