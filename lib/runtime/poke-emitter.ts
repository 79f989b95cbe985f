/**
 * The coalescing window of cross-node announcements, ms. Short, so that a trickle of inserts
 * (one every few ms, each waiting for the last to start) is announced at once instead of at the
 * end of a window the previous insert opened: with 10 ms, the cross-process insert→start p50
 * was 6.5–11 ms (docs/performance.md). A burst still costs at most one announcement per window
 * and queue (500 a second), each an autocommit `pg_notify` (which writes no WAL of its own, so
 * its commit waits for no flush: ≈ 0.2 ms here).
 */
const ANNOUNCE_WINDOW_MS = 2;

/**
 * Per-engine poke emitter (docs/design.md §16.4, §5.5). Every poke reaches the local schedulers
 * of its queue at once: they debounce themselves (a scheduler with free slots picks on the
 * leading edge and coalesces further pokes within 10 ms; one with no free slot drops them), so
 * insert → step start stays one round trip. The cross-node leg is announced on the leading edge
 * too: per queue, the first announcement goes out at once, and further ones within the next
 * 2 ms collapse into one trailing announcement at the window's end, which opens the next window
 * (so a steady stream of inserts announces once per window, however many inserts).
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
    this.open(queue, remote);
    remote(queue);
  }

  /** Opens the window after an announcement; a poke within it is announced at its end. */
  private open(queue: string, remote: (queue: string) => void): void {
    const timer = setTimeout(() => {
      const w = this.windows.get(queue);
      this.windows.delete(queue);
      if (!w?.trailing || this.closed) return;
      this.open(queue, remote);
      remote(queue);
    }, ANNOUNCE_WINDOW_MS);
    this.windows.set(queue, { timer, trailing: false });
  }
}
