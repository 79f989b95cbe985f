/**
 * Runs `task` every `intervalMs` without ever overlapping two runs (a run still going when the
 * timer fires is not doubled); `stop()` clears the timer and waits for the run in progress.
 * The reaper's and the GC's timers.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly task: () => Promise<unknown>,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.runNow(), this.intervalMs);
  }

  /** Runs the task now (unless a run is in progress, which is awaited instead); `stop()` waits for it too. */
  runNow(): Promise<unknown> {
    this.running ??= this.task().finally(() => (this.running = undefined));
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
