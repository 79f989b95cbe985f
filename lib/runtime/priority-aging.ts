import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { AGE_PRIORITIES } from '../sql/maintenance.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { PeriodicTask } from './periodic-task';

/** The resolved `priorityAging` option (docs/operations.md "Priority aging"). */
export interface PriorityAgingConfig {
  /** ms a runnable row waits (due and untouched) before it gains one priority step. */
  readonly after: number;
  /** The most urgent priority aging can give (lower runs first). */
  readonly floor: number;
  /** ms between passes. */
  readonly interval: number;
  /** Rows raised per pass at most; a full pass runs again at once. */
  readonly batch: number;
}

/**
 * Every `priorityAging.interval`, on the maintenance node (GC on): raises runnable rows that
 * have waited `after` ms by one priority step, up to `floor`, so low-priority work behind a
 * steady stream of urgent work cannot wait forever (AGE_PRIORITIES). The claim is unchanged:
 * an aged row simply sorts earlier in its queue. `priority:aged {count}` when any moved.
 */
export class PriorityAging {
  private readonly periodic: PeriodicTask;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: PriorityAgingConfig,
    private readonly telemetry: Telemetry,
  ) {
    this.periodic = new PeriodicTask(config.interval, () => this.sweep());
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One pass (more while full batches come back, at most 10); returns the rows raised. */
  async sweep(): Promise<number> {
    let count = 0;
    try {
      for (let pass = 0; pass < 10; pass++) {
        const aged = await AGE_PRIORITIES.run(this.sql, {
          floor: this.config.floor,
          afterMs: this.config.after,
          batch: this.config.batch,
        });
        count += aged.count;
        if (aged.count > 0) {
          this.telemetry.emit('priority:aged', { count: aged.count }, { queues: aged.queues });
        }
        if (aged.count < this.config.batch) break;
      }
    } catch (err) {
      this.logger.error(`priority aging failed: ${String(err)}`);
    }
    return count;
  }
}
