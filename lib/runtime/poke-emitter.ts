const WINDOW_MS = 100;

/**
 * Per-engine poke emitter (SPEC §16.4): per queue, the first poke fans out at once; further
 * pokes within 100 ms collapse into one trailing fan-out. Fan-out pokes the local schedulers
 * (and, with a cross-node transport, the other nodes).
 */
export class PokeEmitter {
  private readonly windows = new Map<string, { timer: NodeJS.Timeout; trailing: boolean }>();
  private closed = false;

  constructor(
    private readonly enabled: boolean,
    private readonly fanOut: (queue: string) => void,
  ) {}

  poke(queues: Iterable<string>): void {
    if (!this.enabled || this.closed) return;
    for (const queue of queues) {
      const window = this.windows.get(queue);
      if (window) {
        window.trailing = true;
        continue;
      }
      const timer = setTimeout(() => {
        const w = this.windows.get(queue);
        this.windows.delete(queue);
        if (w?.trailing && !this.closed) this.fanOut(queue);
      }, WINDOW_MS);
      this.windows.set(queue, { timer, trailing: false });
      this.fanOut(queue);
    }
  }

  close(): void {
    this.closed = true;
    for (const w of this.windows.values()) clearTimeout(w.timer);
    this.windows.clear();
  }
}
