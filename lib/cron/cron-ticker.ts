import { Logger } from '@nestjs/common';

import type { ScheduleFirer } from './schedule-firer';

/**
 * The timer around a node's `ScheduleFirer` (docs/design.md §29): a tick, then a sleep until
 * the earliest next fire that tick read (measured on the database clock the tick fired on, so
 * a node clock that is off does not shift fires), at most `interval` ms, so schedules written by
 * other nodes are seen within one interval. Ticks never overlap; `nudge()` ticks now (a
 * schedule changed on this node); `stop()` clears the timer and waits for the tick in progress.
 * Runs on every node with schedules enabled that runs queues or maintenance; exactly once holds
 * for any number of them (FIRE_SCHEDULE).
 */
export class CronTicker {
  private readonly logger = new Logger('GenDurable');
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** Epoch ms of the last tick that completed (health). */
  lastTickAt = 0;

  constructor(
    private readonly firer: ScheduleFirer,
    private readonly intervalMs: number,
  ) {}

  /** Runs the first tick (awaited: boot fires what is due before it reports started). */
  start(): Promise<void> {
    this.lastTickAt = Date.now();
    return this.runTick();
  }

  /** Ticks now (or right after the tick in progress). */
  nudge(): void {
    if (this.stopped) return;
    if (this.running) {
      void this.running.then(() => this.arm(0));
      return;
    }
    this.arm(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private runTick(): Promise<void> {
    this.running ??= (async () => {
      let delay = this.intervalMs;
      try {
        const result = await this.firer.tick();
        this.lastTickAt = Date.now();
        if (result.nextAt !== null) {
          delay = Math.min(delay, Math.max(0, result.nextAt.getTime() - result.now.getTime()));
        }
      } catch (err) {
        this.logger.error(
          `schedule tick failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      } finally {
        this.running = undefined;
      }
      this.arm(delay);
    })();
    return this.running;
  }

  private arm(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runTick();
    }, delayMs);
    this.timer.unref();
  }
}
