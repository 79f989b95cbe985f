import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { SET_LOCAL_NO_JIT } from '../sql/queue.sql';
import { PRUNE_STATS, WRITE_STATS_SNAPSHOT } from '../sql/stats.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { PeriodicTask } from './periodic-task';

/**
 * A node's snapshots may take at most 1/this of its time (docs/dashboard-data.md, "Pacing"):
 * after a write that took `d` ms, this node takes its next no sooner than `d × STATS_BUDGET` ms
 * after that write ended. A write of the usual tens of ms changes nothing (the next check is a
 * `stats.interval` later anyway); one that walks millions of dead index entries under a pinned
 * xmin horizon (seconds) is taken every few minutes instead of every minute.
 */
export const STATS_BUDGET = 100;

/** However slow the last write, this node takes the next one at most this many ms later. */
export const STATS_MAX_GAP_MS = 3_600_000;

/** A write that took at least this many ms is logged as a warning, with when the next comes. */
export const STATS_SLOW_MS = 1_000;

/**
 * The stats snapshot on a maintenance node (docs/design.md §30; docs/dashboard-data.md): every
 * `stats.interval` it writes the current minute's per-queue counts into gen_durable_stats
 * unless some node already did (one statement, a no-op probe then), and prunes rows older than
 * `stats.retention`; a slow write spaces this node's next ones ({@link STATS_BUDGET}).
 * `stats:snapshot {queues, durationMs}` when this node wrote the minute.
 */
export class StatsSnapshot {
  private readonly periodic: PeriodicTask;
  private readonly logger = new Logger('GenDurable');
  /** This node's clock (ms) before which it takes no snapshot ({@link STATS_BUDGET}). */
  private notBefore = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: {
      readonly interval: number;
      readonly retention: number;
      readonly cap: number;
    },
    private readonly telemetry: Telemetry,
    private readonly now: () => number = Date.now,
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
   * then prunes expired rows; answers [] without a statement while a slow write's pacing
   * ({@link STATS_BUDGET}) holds this node back. Errors are logged; a failed attempt is paced
   * on its duration like a write, so the next tick tries again only if it failed fast. A failed
   * prune is logged on its own: the minute it follows is written, paced and reported as such.
   */
  async take(): Promise<string[]> {
    const startedAt = this.now();
    if (startedAt < this.notBefore) return [];
    let written: string[];
    try {
      // JIT off first, in one transaction: the statement's planner cost (subplans per queue)
      // passes jit_above_cost, and compiling it took ~3 s of a ~70 ms statement (npm run explain).
      const sql = this.sql;
      written = await sql.transaction(async (tx) => {
        await SET_LOCAL_NO_JIT.run(sql, undefined, tx);
        return WRITE_STATS_SNAPSHOT.run(sql, { cap: this.config.cap }, tx);
      });
    } catch (err) {
      // A write that failed after walking for a while (a statement_timeout under a long pin)
      // cost as much as one that succeeded: it is paced the same way, not retried every tick.
      this.paceAfter(startedAt, 'failed after');
      this.logger.error(`stats snapshot failed: ${String(err)}`);
      return [];
    }
    if (written.length === 0) return written;
    const durationMs = this.paceAfter(startedAt, 'took');
    this.telemetry.emit('stats:snapshot', { queues: written.length, durationMs }, {});
    try {
      await PRUNE_STATS.run(this.sql, { retentionMs: this.config.retention });
    } catch (err) {
      // The expired rows stay until the next written minute prunes them.
      this.logger.error(`stats snapshot prune failed: ${String(err)}`);
    }
    return written;
  }

  /**
   * Holds this node back for the attempt's duration × {@link STATS_BUDGET} (at most
   * {@link STATS_MAX_GAP_MS}) and warns when the attempt was slow; answers its duration in ms.
   */
  private paceAfter(startedAt: number, verb: 'took' | 'failed after'): number {
    const endedAt = this.now();
    const durationMs = Math.max(0, endedAt - startedAt);
    const gapMs = Math.min(durationMs * STATS_BUDGET, STATS_MAX_GAP_MS);
    this.notBefore = endedAt + gapMs;
    if (durationMs >= STATS_SLOW_MS) {
      this.logger.warn(
        `stats snapshot ${verb} ${durationMs} ms (a pinned xmin horizon makes its counts walk dead index entries: docs/operations.md); this node takes its next in ${Math.round(gapMs / 1000)} s`,
      );
    }
    return durationMs;
  }
}
