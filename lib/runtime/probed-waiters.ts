/** A parked wait: `wake` settles it (whoever comes first, the timer, a nudge, an abort, a probe). */
export interface ParkedWaiter {
  wake(): void;
}

/**
 * Callers parked per instance id until something may have changed for them, the shared half of
 * the await watcher and the stream watcher (docs/design.md §9, docs/streams.md): each wait is
 * woken by this node's own commits (`wakeAll`), by its re-arm timer, by an abort signal, or by
 * the subclass's batched `probe`, run once per `tick` while anyone waits. No timer runs while
 * no one waits; after `close()` every waiter is woken and the subclass's later waits are
 * short pauses.
 */
export abstract class ProbedWaiters<W extends ParkedWaiter> {
  /** Waiters by instance id. */
  protected readonly waiters = new Map<string, Set<W>>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private shut = false;

  constructor(private readonly tick: number) {}

  /** The engine closed: waits no longer park on the probe. */
  get closed(): boolean {
    return this.shut;
  }

  /** Callers waiting now. */
  get waiting(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** True while the probe timer is armed (only while someone waits). */
  get probeArmed(): boolean {
    return this.probeTimer !== undefined;
  }

  /** Shutdown: every waiter is woken. */
  close(): void {
    this.shut = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    for (const set of [...this.waiters.values()]) for (const w of [...set]) w.wake();
  }

  /** Wakes every waiter of `ids` that `which` selects (all of them by default). */
  protected wakeAll(ids: Iterable<string>, which: (w: W) => boolean = () => true): void {
    for (const id of ids) {
      const set = this.waiters.get(id);
      if (set) for (const w of [...set]) if (which(w)) w.wake();
    }
  }

  /**
   * Parks a waiter of instance `id` (`fields` plus its `wake`) for at most `ms`, or until
   * `signal` aborts; resolves when it is woken. Never rejects.
   */
  protected park(
    id: string,
    fields: Omit<W, 'wake'>,
    ms: number,
    signal?: AbortSignal,
  ): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted) {
        resolve();
        return;
      }
      let set = this.waiters.get(id);
      if (!set) {
        set = new Set();
        this.waiters.set(id, set);
      }
      const waiters = set;
      const onAbort = (): void => waiter.wake();
      const waiter = {
        ...fields,
        wake: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.waiters.get(id) === waiters) this.waiters.delete(id);
          // No waiters, no timer (docs/design.md §9).
          if (this.waiters.size === 0 && this.probeTimer) {
            clearTimeout(this.probeTimer);
            this.probeTimer = undefined;
          }
          resolve();
        },
      } as W;
      const timer = setTimeout(() => waiter.wake(), ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.add(waiter);
      this.armProbe();
    });
  }

  /** One batched read for every waiter, waking those it settles. A throw skips a tick. */
  protected abstract probe(): Promise<void>;

  private armProbe(): void {
    if (this.shut || this.probeTimer || this.waiters.size === 0) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.runProbe().finally(() => this.armProbe());
    }, this.tick);
  }

  private async runProbe(): Promise<void> {
    if (this.probing || this.waiters.size === 0) return;
    this.probing = true;
    try {
      await this.probe();
    } catch {
      // A failed probe skips a tick: the waiters read again at their re-arm.
    } finally {
      this.probing = false;
    }
  }
}
