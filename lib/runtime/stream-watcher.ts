import type { SqlExecutor } from '../db/sql-executor';
import { isTerminalStatus } from '../gen-durable.constants';
import { STREAM_PROBE, type StreamProbe } from '../sql/stream.sql';

interface Waiter {
  readonly id: string;
  readonly name: string;
  /** The offset the reader waits for: woken once the stream holds more than this many chunks. */
  readonly next: number;
  wake(): void;
}

/** A waiter is woken at least this often, whatever the probe says (it reads again). */
const REARM_MS = 1_000;
/** After `close()`, waits are plain pauses of this length. */
const CLOSED_POLL_MS = 25;

/**
 * The engine's wait of stream readers between two reads (docs/streams.md), as the await
 * watcher's for `await` (docs/design.md §9): a reader waiting for the chunk at `next` is woken
 * at once by this node's own appends (`appended`) and by its outcomes (`nudgeInstances`: an
 * instance may have ended), and otherwise by one batched STREAM_PROBE per `tick` for every
 * stream any reader of the node waits on, which wakes those whose stream grew or whose
 * instance ended or is gone. No timer runs while no reader waits.
 */
export class StreamWatcher {
  /** Waiters by instance id. */
  private readonly waiters = new Map<string, Set<Waiter>>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private isClosed = false;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly tick: number,
  ) {}

  /** The engine closed: its readers stop at their next wait (docs/streams.md). */
  get closed(): boolean {
    return this.isClosed;
  }

  /** Readers waiting now. */
  get waiting(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** This node appended to `streams`: their readers read again. */
  appended(streams: readonly { readonly id: string; readonly name: string }[]): void {
    for (const s of streams) {
      const set = this.waiters.get(s.id);
      if (set) for (const w of [...set]) if (w.name === s.name) w.wake();
    }
  }

  /** Outcomes of `ids` committed on this node (they may have ended): their readers read again. */
  nudgeInstances(ids: Iterable<string>): void {
    for (const id of ids) {
      const set = this.waiters.get(id);
      if (set) for (const w of [...set]) w.wake();
    }
  }

  /** Shutdown: every waiting reader is woken (and stops); later waits are short pauses. */
  close(): void {
    this.isClosed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    for (const set of [...this.waiters.values()]) for (const w of [...set]) w.wake();
  }

  /**
   * Resolves when the stream `name` of instance `id` may hold a chunk at `next`, or its
   * instance may have ended, or after at most a second, or when `signal` aborts. Never rejects.
   */
  wait(id: string, name: string, next: number, _idle: number, signal?: AbortSignal): Promise<void> {
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
      const waiter: Waiter = {
        id,
        name,
        next,
        wake: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.waiters.get(id) === waiters) this.waiters.delete(id);
          if (this.waiters.size === 0 && this.probeTimer) {
            clearTimeout(this.probeTimer);
            this.probeTimer = undefined;
          }
          resolve();
        },
      };
      const timer = setTimeout(() => waiter.wake(), this.isClosed ? CLOSED_POLL_MS : REARM_MS);
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.add(waiter);
      this.armProbe();
    });
  }

  private armProbe(): void {
    if (this.isClosed || this.probeTimer || this.waiters.size === 0) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe().finally(() => this.armProbe());
    }, this.tick);
  }

  private async probe(): Promise<void> {
    if (this.probing || this.waiters.size === 0) return;
    this.probing = true;
    try {
      const keys = new Map<string, { id: string; name: string }>();
      for (const set of this.waiters.values()) {
        for (const w of set) keys.set(`${w.id}\u0000${w.name}`, { id: w.id, name: w.name });
      }
      const streams = [...keys.values()];
      const rows = await STREAM_PROBE.run(this.sql, { streams });
      const found = new Map<string, StreamProbe | undefined>();
      streams.forEach((s, k) => found.set(`${s.id}\u0000${s.name}`, rows[k]));
      for (const [id, set] of this.waiters) {
        for (const w of [...set]) {
          const r = found.get(`${id}\u0000${w.name}`);
          // Not probed (it began to wait during the probe): left for the next one.
          if (!found.has(`${id}\u0000${w.name}`)) continue;
          if (
            r === undefined ||
            r.status === null ||
            isTerminalStatus(r.status) ||
            r.length > w.next
          ) {
            w.wake();
          }
        }
      }
    } catch {
      // A failed probe skips a tick: the waiters re-read at their re-arm.
    } finally {
      this.probing = false;
    }
  }
}
