const WINDOW_MS = 100;

/**
 * Per-engine poke emitter (SPEC §16.4, §5.5). Every poke reaches the local schedulers of its
 * queue at once: they debounce themselves (an idle scheduler picks on the leading edge and
 * coalesces further pokes within 10 ms; one with no free slot drops them), so insert → step start stays
 * one round trip. The cross-node leg is what can herd: per queue, the first announcement goes
 * out at once and further ones within 100 ms collapse into one trailing announcement.
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
    }, WINDOW_MS);
    this.windows.set(queue, { timer, trailing: false });
    remote(queue);
  }
}
