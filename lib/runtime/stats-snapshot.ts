import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { SET_LOCAL_NO_JIT } from '../sql/queue.sql';
import { PRUNE_STATS, WRITE_STATS_SNAPSHOT } from '../sql/stats.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { PeriodicTask } from './periodic-task';

/**
 * The stats snapshot on a maintenance node (docs/design.md §30; docs/dashboard-data.md): every
 * `stats.interval` it writes the current minute's per-queue counts into gen_durable_stats
 * unless some node already did (one statement, a no-op probe then), and prunes rows older than
 * `stats.retention`. `stats:snapshot {queues}` when this node wrote the minute.
 */
export class StatsSnapshot {
  private readonly periodic: PeriodicTask;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: {
      readonly interval: number;
      readonly retention: number;
      readonly cap: number;
    },
    private readonly telemetry: Telemetry,
  ) {
    this.periodic = new PeriodicTask(config.interval, () => this.take());
  }

  /** Takes a snapshot every interval (the first one interval after start). */
  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /**
   * Writes this minute's rows unless another node has (answers the queues written, [] then),
   * then prunes expired rows. Errors are logged: the next tick tries again.
   */
  async take(): Promise<string[]> {
    let written: string[] = [];
    try {
      // JIT off first, in one transaction: the statement's planner cost (subplans per queue)
      // passes jit_above_cost, and compiling it took ~3 s of a ~70 ms statement (npm run explain).
      const sql = this.sql;
      written = await sql.transaction(async (tx) => {
        await SET_LOCAL_NO_JIT.run(sql, undefined, tx);
        return WRITE_STATS_SNAPSHOT.run(sql, { cap: this.config.cap }, tx);
      });
      if (written.length > 0) {
        await PRUNE_STATS.run(this.sql, { retentionMs: this.config.retention });
        this.telemetry.emit('stats:snapshot', { queues: written.length }, {});
      }
    } catch (err) {
      this.logger.error(`stats snapshot failed: ${String(err)}`);
    }
    return written;
  }
}
