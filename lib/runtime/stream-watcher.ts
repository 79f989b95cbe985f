import type { SqlExecutor } from '../db/sql-executor';
import { isTerminalStatus } from '../gen-durable.constants';
import { STREAM_PROBE, type StreamProbe } from '../sql/stream.sql';
import { type ParkedWaiter, ProbedWaiters } from './probed-waiters';

interface Waiter extends ParkedWaiter {
  readonly id: string;
  readonly name: string;
  /** The offset the reader waits for: woken once the stream holds more than this many chunks. */
  readonly next: number;
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
export class StreamWatcher extends ProbedWaiters<Waiter> {
  constructor(
    private readonly sql: SqlExecutor,
    tick: number,
  ) {
    super(tick);
  }

  /** This node appended to `streams`: their readers read again. */
  appended(streams: readonly { readonly id: string; readonly name: string }[]): void {
    for (const s of streams) this.wakeAll([s.id], (w) => w.name === s.name);
  }

  /** Outcomes of `ids` committed on this node (they may have ended): their readers read again. */
  nudgeInstances(ids: Iterable<string>): void {
    this.wakeAll(ids);
  }

  /**
   * Resolves when the stream `name` of instance `id` may hold a chunk at `next`, or its
   * instance may have ended, or after at most a second, or when `signal` aborts. Never rejects.
   * After shutdown every waiting reader is woken (and stops); later waits are short pauses.
   */
  wait(id: string, name: string, next: number, _idle: number, signal?: AbortSignal): Promise<void> {
    return this.park(id, { id, name, next }, this.closed ? CLOSED_POLL_MS : REARM_MS, signal);
  }

  /**
   * One STREAM_PROBE for every stream a reader waits on: wakes those whose stream grew or
   * whose instance ended or is gone.
   */
  protected async probe(): Promise<void> {
    const keys = new Map<string, { id: string; name: string }>();
    for (const set of this.waiters.values()) {
      for (const w of set) keys.set(`${w.id}\u0000${w.name}`, { id: w.id, name: w.name });
    }
    const streams = [...keys.values()];
    const rows = await STREAM_PROBE.run(this.sql, { streams });
    const found = new Map<string, StreamProbe | undefined>();
    streams.forEach((s, k) => found.set(`${s.id}\u0000${s.name}`, rows[k]));
    for (const id of [...this.waiters.keys()]) {
      this.wakeAll([id], (w) => {
        const key = `${id}\u0000${w.name}`;
        // Not probed (it began to wait during the probe): left for the next one.
        if (!found.has(key)) return false;
        const r = found.get(key);
        return (
          r === undefined || r.status === null || isTerminalStatus(r.status) || r.length > w.next
        );
      });
    }
  }
}
