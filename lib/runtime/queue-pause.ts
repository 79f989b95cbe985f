import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { READ_QUEUE_PAUSE } from '../sql/queue.sql';
import type { Telemetry } from '../telemetry/telemetry';

/**
 * One queue's fleet-wide pause as its scheduler on this node last learned it (docs/design.md
 * §27.6): from each claim's answer, or from a probe when a saturated scheduler makes no claim.
 */
export class QueuePause {
  private pausedNow = false;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    private readonly telemetry: Telemetry,
    private readonly identity: { readonly queue: string; readonly worker: string },
  ) {}

  get paused(): boolean {
    return this.pausedNow;
  }

  /**
   * On learning its queue paused, the scheduler releases its buffered rows to runnable
   * (`releaseBuffer`, answering how many; attempt kept, the reaper takes them if the release
   * fails) and starts no further step; running steps finish and commit. On learning it
   * resumed, it claims again.
   */
  async learn(paused: boolean, releaseBuffer: () => Promise<number>): Promise<void> {
    if (paused === this.pausedNow) return;
    this.pausedNow = paused;
    if (!paused) {
      this.telemetry.emit('scheduler:resumed', { count: 1 }, this.identity);
      return;
    }
    const released = await releaseBuffer();
    this.telemetry.emit('scheduler:paused', { released }, this.identity);
  }

  /**
   * A scheduler saturated with buffered rows makes no claim, so a poll tick without one reads
   * the pause itself: one primary-key read per poll tick, in that state only. A failed read
   * changes nothing (the next tick tries again).
   */
  async probe(releaseBuffer: () => Promise<number>): Promise<void> {
    try {
      const pause = await READ_QUEUE_PAUSE.run(this.sql, { queue: this.identity.queue });
      await this.learn(pause !== null, releaseBuffer);
    } catch (err) {
      this.logger.warn(`reading the pause of queue ${this.identity.queue} failed: ${String(err)}`);
    }
  }
}
