import { ChurnMap } from '../util/churn-map';
import type { ClaimedRow } from './claimed-row';

/** A held row the executor has: its step running, or its outcome awaiting commit. */
export interface Task {
  readonly row: ClaimedRow;
  /** performance.now() at dispatch. */
  readonly startedAt: number;
  /** Settles once the executor is done with the row (its flush answered, or the crash path). */
  readonly done: Promise<void>;
  /** Its step returned and its outcome is with the flusher (set by {@link StepSlots.returned}). */
  awaitingCommit: boolean;
  /** Its fairness key is counted among the running keys (set by {@link StepSlots.start}). */
  keyCounted?: boolean;
}

/**
 * One queue's held rows past its buffer (docs/design.md §5, §26.1): steps running (at most
 * `concurrency`, abandoned steps past their timeout included) and rows whose outcome awaits its
 * commit (at most {@link maxAwaitingCommit}). A row's id is here at most once.
 *
 * A step that ran past its timeout (docs/design.md §27.5) is routed as a `StepTimeoutError` and
 * its row moves on to awaiting commit like any other, but its promise may still be running:
 * such an abandoned step keeps counting against `concurrency` until it settles, so
 * `concurrency` still bounds the step code running on the node. Its row is not held: the drain
 * does not wait for it.
 *
 * One map for both, each task flagged, and two counters: a row that moves from running to
 * awaiting its commit changes a flag instead of leaving one map for another (a drain churned
 * both maps' tables once per step).
 */
export class StepSlots {
  /** Every held row: running or awaiting its commit (added and removed once per step). */
  private readonly held = new ChurnMap<Task>();
  /** Held rows whose step is running: at most `concurrency`. */
  private running = 0;
  /** Held rows whose outcome is with the flusher: at most {@link maxAwaitingCommit}. */
  private awaiting = 0;
  /** Steps past their timeout whose promise has not settled: each still takes a slot. */
  private abandoned = 0;
  /**
   * Running steps per fairness key (null: unkeyed), counted only for the tasks started with
   * `countKey` (a fair queue's): what its slots kept for new keys ask (docs/many-tenants.md "A
   * slot for new keys").
   */
  private readonly runningKeys = new Map<string | null, number>();
  /** Bumped each time a key's last running step returns: a kept slot may now serve its rows. */
  private keysFreed = 0;

  /**
   * @param maxAwaitingCommit The backpressure bound: a step is dispatched only while running
   *   steps and rows awaiting commit are fewer than `2 × concurrency + prefetch`, so at most
   *   that many await commit.
   */
  constructor(
    readonly concurrency: number,
    readonly maxAwaitingCommit: number,
  ) {}

  /** Steps running now (what `concurrency` bounds), abandoned ones past their timeout included. */
  get inFlight(): number {
    return this.running + this.abandoned;
  }

  /** Rows whose step returned and whose outcome awaits its commit. */
  get awaitingCommit(): number {
    return this.awaiting;
  }

  /** Steps running and rows awaiting commit. */
  get busy(): number {
    return this.inFlight + this.awaiting;
  }

  /** A held row is running or awaiting its commit. */
  get any(): boolean {
    return this.held.size > 0;
  }

  /** The flusher is too far behind: dispatch and claims wait for its answers. */
  backpressured(): boolean {
    return this.held.size >= this.maxAwaitingCommit;
  }

  /** A free running slot exists and the flusher keeps up. */
  canStart(): boolean {
    return this.inFlight < this.concurrency && !this.backpressured();
  }

  /** The row `id` is running or awaiting its commit (never a second task for it, §26.1). */
  holds(id: string): boolean {
    return this.held.has(id);
  }

  /**
   * A step starts. With `countKey` (a fair queue), its fairness key counts as running until the
   * step returns ({@link keyRunning}).
   */
  start(task: Task, countKey = false): void {
    this.held.set(task.row.id, task);
    this.running += 1;
    if (!countKey) return;
    task.keyCounted = true;
    const key = task.row.fairnessKey ?? null;
    this.runningKeys.set(key, (this.runningKeys.get(key) ?? 0) + 1);
  }

  /** A step of fairness key `key` (null: unkeyed) runs now, among the tasks counted by key. */
  keyRunning(key: string | null): boolean {
    return this.runningKeys.has(key);
  }

  /** Changes each time a key stops running: a buffer scan for a new key's row may find one. */
  get keysFreedCount(): number {
    return this.keysFreed;
  }

  /** The task's step no longer runs: its key's count goes down. */
  private stopped(task: Task): void {
    if (task.keyCounted !== true) return;
    task.keyCounted = false;
    const key = task.row.fairnessKey ?? null;
    const n = (this.runningKeys.get(key) ?? 1) - 1;
    if (n > 0) {
      this.runningKeys.set(key, n);
      return;
    }
    this.runningKeys.delete(key);
    this.keysFreed += 1;
  }

  /** The row held under `id`, running or awaiting its commit. */
  rowOf(id: string): ClaimedRow | undefined {
    return this.held.get(id)?.row;
  }

  /**
   * The row's last step returned and its outcome went to the flusher: it moves to awaiting its
   * commit. Answers the ms since dispatch, or undefined when it was not running.
   */
  returned(id: string): number | undefined {
    const task = this.held.get(id);
    if (!task || task.awaitingCommit) return undefined;
    task.awaitingCommit = true;
    this.running -= 1;
    this.awaiting += 1;
    this.stopped(task);
    return performance.now() - task.startedAt;
  }

  /** The executor is done with the row: where it was (`running` = the crash path). */
  finish(id: string): 'running' | 'awaiting' | undefined {
    const task = this.held.get(id);
    if (!task) return undefined;
    this.held.delete(id);
    if (task.awaitingCommit) {
      this.awaiting -= 1;
      return 'awaiting';
    }
    this.running -= 1;
    this.stopped(task);
    return 'running';
  }

  /** A step ran past its timeout: its promise keeps a slot until `settled`, then `freed` runs. */
  abandon(settled: Promise<void>, freed: () => void): void {
    this.abandoned += 1;
    void settled.then(() => {
      this.abandoned -= 1;
      freed();
    });
  }

  /** Rows whose step is running now. */
  runningRows(): ClaimedRow[] {
    const rows: ClaimedRow[] = [];
    for (const t of this.held.values()) if (!t.awaitingCommit) rows.push(t.row);
    return rows;
  }

  /** Every held row here: running, then awaiting commit. */
  rows(): ClaimedRow[] {
    return this.tasks().map((t) => t.row);
  }

  /** Every task here now: running, then awaiting commit. */
  tasks(): Task[] {
    const out: Task[] = [];
    for (const t of this.held.values()) if (!t.awaitingCommit) out.push(t);
    for (const t of this.held.values()) if (t.awaitingCommit) out.push(t);
    return out;
  }

  /** Waits up to `ms` for every task here now to be done (the drain); false when time ran out. */
  async settleWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const finished = await Promise.race([
      Promise.all(this.tasks().map((t) => t.done)).then(() => true),
      timeout,
    ]);
    clearTimeout(timer);
    return finished;
  }
}
