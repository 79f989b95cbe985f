import type { SqlExecutor } from '../db/sql-executor';
import { type AwaitUntil, awaitAnswer, awaitSettles } from '../instance/await-answer';
import type { AwaitResult } from '../instance/instance-view';
import { PROBE_STATUSES, readInstanceById } from '../sql/instance.sql';
import { type ParkedWaiter, ProbedWaiters } from './probed-waiters';

interface Waiter extends ParkedWaiter {
  readonly until: AwaitUntil;
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
export class AwaitWatcher extends ProbedWaiters<Waiter> {
  constructor(
    private readonly sql: SqlExecutor,
    tick: number,
  ) {
    super(tick);
  }

  /** Nudges the waiters of `ids` (a same-node commit changed them). */
  nudge(ids: Iterable<string>): void {
    this.wakeAll(ids);
  }

  /**
   * Answers from the row (one PK read per check). The first read's errors reach the caller;
   * once a snapshot exists, a failed or hung re-read (a pool closed by a shutdown, a blip)
   * never rejects: the waiter keeps polling and answers `busy` with its last snapshot at the
   * deadline (at most one re-arm period late). After shutdown, waiters fall back to a 25 ms
   * poll loop instead of failing.
   */
  async await(id: string, timeoutMs: number, until: AwaitUntil): Promise<AwaitResult> {
    const deadline = Date.now() + timeoutMs;
    let answer = awaitAnswer(await readInstanceById(this.sql, id), until);
    while (answer.kind === 'busy') {
      const remaining = deadline - Date.now();
      if (remaining <= 0) return answer;
      await this.park(id, { until }, Math.min(remaining, this.closed ? CLOSED_POLL_MS : REARM_MS));
      // NOTE: a pool ended under a pending connect never settles it (pg-pool leaves queued
      // requests hanging), so a re-read is bounded by the deadline plus one re-arm period.
      const read = await boundedRead(
        readInstanceById(this.sql, id).then((row) => ({ row })),
        Math.max(deadline - Date.now(), 0) + REARM_MS,
      );
      if (read) answer = awaitAnswer(read.row, until);
    }
    return answer;
  }

  /** One PROBE_STATUSES for every awaited id: wakes the waiters whose row settles them or is gone. */
  protected async probe(): Promise<void> {
    const ids = [...this.waiters.keys()];
    const rows = await PROBE_STATUSES.run(this.sql, { ids });
    const status = new Map(rows.map((r) => [r.id, r.status]));
    for (const id of ids) {
      const s = status.get(id);
      this.wakeAll([id], (w) => s === undefined || awaitSettles(s, w.until));
    }
  }
}
