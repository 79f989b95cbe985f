import type { ClaimedRow } from './claimed-row';

/** A held row the executor has: its step running, or its outcome awaiting commit. */
export interface Task {
  readonly row: ClaimedRow;
  /** performance.now() at dispatch. */
  readonly startedAt: number;
  /** Settles once the executor is done with the row (its flush answered, or the crash path). */
  readonly done: Promise<void>;
}

/**
 * One queue's held rows past its buffer (docs/design.md §5, §26.1): steps running (at most
 * `concurrency`, abandoned steps past their timeout included) and rows whose outcome awaits its
 * commit (at most {@link maxAwaitingCommit}). A row's id is here at most once.
 */
export class StepSlots {
  /** Rows whose step is running: at most `concurrency`. */
  private readonly running = new Map<string, Task>();
  /** Rows whose outcome is with the flusher: at most {@link maxAwaitingCommit}. */
  private readonly awaiting = new Map<string, Task>();
  /** Steps past their timeout whose promise has not settled: each still takes a slot. */
  private abandoned = 0;

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
    return this.running.size + this.abandoned;
  }

  /** Rows whose step returned and whose outcome awaits its commit. */
  get awaitingCommit(): number {
    return this.awaiting.size;
  }

  /** Steps running and rows awaiting commit. */
  get busy(): number {
    return this.inFlight + this.awaiting.size;
  }

  /** A held row is running or awaiting its commit. */
  get any(): boolean {
    return this.running.size > 0 || this.awaiting.size > 0;
  }

  /** The flusher is too far behind: dispatch and claims wait for its answers. */
  backpressured(): boolean {
    return this.running.size + this.awaiting.size >= this.maxAwaitingCommit;
  }

  /** A free running slot exists and the flusher keeps up. */
  canStart(): boolean {
    return this.inFlight < this.concurrency && !this.backpressured();
  }

  /** The row `id` is running or awaiting its commit (never a second task for it, §26.1). */
  holds(id: string): boolean {
    return this.running.has(id) || this.awaiting.has(id);
  }

  start(task: Task): void {
    this.running.set(task.row.id, task);
  }

  /**
   * The row's last step returned and its outcome went to the flusher: it moves to awaiting its
   * commit. Answers the ms since dispatch, or undefined when it was not running.
   */
  returned(id: string): number | undefined {
    const task = this.running.get(id);
    if (!task) return undefined;
    this.running.delete(id);
    this.awaiting.set(id, task);
    return performance.now() - task.startedAt;
  }

  /** The executor is done with the row: where it was (`running` = the crash path). */
  finish(id: string): 'running' | 'awaiting' | undefined {
    if (this.running.delete(id)) return 'running';
    if (this.awaiting.delete(id)) return 'awaiting';
    return undefined;
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
    return [...this.running.values()].map((t) => t.row);
  }

  /** Every held row here: running, then awaiting commit. */
  rows(): ClaimedRow[] {
    const rows: ClaimedRow[] = [];
    for (const t of this.running.values()) rows.push(t.row);
    for (const t of this.awaiting.values()) rows.push(t.row);
    return rows;
  }

  /** Every task here now. */
  tasks(): Task[] {
    return [...this.running.values(), ...this.awaiting.values()];
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
