import type { SqlExecutor } from '../db/sql-executor';
import { type AwaitUntil, awaitAnswer, awaitSettles } from '../instance/await-answer';
import type { AwaitResult } from '../instance/instance-view';
import { GET_INSTANCE_BY_ID, PROBE_STATUSES } from '../sql/instance.sql';

interface Waiter {
  readonly until: AwaitUntil;
  wake(): void;
}

const REARM_MS = 1_000;
const CLOSED_POLL_MS = 25;

/** The read's answer, or undefined if it failed or did not settle within `ms`. */
function boundedRead<T>(read: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise<T | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    read.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}

/**
 * Caller-side await (docs/design.md §9): answers from the row; waiters are nudged by same-node commits
 * at once and by one batched probe per `tick` while any waiter exists (no timer otherwise).
 */
export class AwaitWatcher {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly tick: number,
  ) {}

  get waiting(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** True while the cross-node probe timer is armed (only while someone waits). */
  get probeArmed(): boolean {
    return this.probeTimer !== undefined;
  }

  /** Nudges the waiters of `ids` (a same-node commit changed them). */
  nudge(ids: Iterable<string>): void {
    for (const id of ids) {
      const set = this.waiters.get(id);
      if (set) for (const w of set) w.wake();
    }
  }

  /** After shutdown, waiters fall back to a 25 ms poll loop instead of failing. */
  close(): void {
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    for (const set of this.waiters.values()) for (const w of set) w.wake();
  }

  /**
   * Answers from the row (one PK read per check). The first read's errors reach the caller;
   * once a snapshot exists, a failed or hung re-read (a pool closed by a shutdown, a blip)
   * never rejects: the waiter keeps polling and answers `busy` with its last snapshot at the
   * deadline (at most one re-arm period late).
   */
  async await(id: string, timeoutMs: number, until: AwaitUntil): Promise<AwaitResult> {
    const deadline = Date.now() + timeoutMs;
    let answer = awaitAnswer(await GET_INSTANCE_BY_ID.run(this.sql, { id }), until);
    while (answer.kind === 'busy') {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return answer;
      await this.wait(id, until, Math.min(remaining, this.closed ? CLOSED_POLL_MS : REARM_MS));
      // NOTE: a pool ended under a pending connect never settles it (pg-pool leaves queued
      // requests hanging), so a re-read is bounded by the deadline plus one re-arm period.
      const read = await boundedRead(
        GET_INSTANCE_BY_ID.run(this.sql, { id }).then((row) => ({ row })),
        Math.max(deadline - Date.now(), 0) + REARM_MS,
      );
      if (read) answer = awaitAnswer(read.row, until);
    }
    return answer;
  }

  private wait(id: string, until: AwaitUntil, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.waiters.get(id);
      if (!set) {
        set = new Set();
        this.waiters.set(id, set);
      }
      const waiters = set;
      const waiter: Waiter = {
        until,
        wake: () => {
          clearTimeout(timer);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.waiters.get(id) === waiters) this.waiters.delete(id);
          // No waiters, no timer (docs/design.md §9).
          if (this.waiters.size === 0 && this.probeTimer) {
            clearTimeout(this.probeTimer);
            this.probeTimer = undefined;
          }
          resolve();
        },
      };
      const timer = setTimeout(() => waiter.wake(), ms);
      waiters.add(waiter);
      this.armProbe();
    });
  }

  private armProbe(): void {
    if (this.closed || this.probeTimer || this.waiters.size === 0) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe().finally(() => this.armProbe());
    }, this.tick);
  }

  private async probe(): Promise<void> {
    if (this.probing || this.waiters.size === 0) return;
    this.probing = true;
    try {
      const ids = [...this.waiters.keys()];
      const rows = await PROBE_STATUSES.run(this.sql, { ids });
      const status = new Map(rows.map((r) => [r.id, r.status]));
      for (const id of ids) {
        const s = status.get(id);
        const set = this.waiters.get(id);
        if (!set) continue;
        for (const w of [...set]) if (s === undefined || awaitSettles(s, w.until)) w.wake();
      }
    } catch {
      // a failed probe skips a tick
    } finally {
      this.probing = false;
    }
  }
}
