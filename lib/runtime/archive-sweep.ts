import type { SqlExecutor } from '../db/sql-executor';
import type { Retention, RetentionOverride } from '../fsm/retention';
import {
  ARCHIVE_DROP_EXPIRED,
  ARCHIVE_EXTEND,
  ARCHIVE_MOVE,
  type ArchiveMoved,
} from '../sql/archive.sql';

/** Partitions created ahead at most: a longer retention keeps its rows hot past this horizon. */
export const MAX_PARTITIONS_AHEAD = 400;

const GRAIN_MS = { hour: 3_600_000, day: 86_400_000 } as const;

/** What one archive pass did (docs/archive.md). */
export interface ArchivePass {
  /** Partition ranges created ahead. */
  readonly created: number;
  /** Partition ranges dropped: their retention ended. */
  readonly dropped: number;
  /** Rows moved out of the hot table. */
  readonly moved: ArchiveMoved;
}

/**
 * The archive's share of a GC sweep (docs/archive.md): creates the partitions ahead (up to the
 * longest `done` retention + one grain, at most {@link MAX_PARTITIONS_AHEAD}),
 * drops the partitions whose retention ended, then moves ended rows out of the hot table in
 * batches of `batch` until a batch comes back short (or `stopping()` says so).
 */
export class ArchiveSweep {
  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: {
      readonly grain: 'hour' | 'day';
      readonly afterMs: number;
      readonly batch: number;
      readonly retention: Retention;
      readonly overrides: readonly {
        readonly fsm: string;
        readonly retention: RetentionOverride;
      }[];
    },
  ) {}

  /** The ms ahead of now the partitions must cover. */
  aheadMs(): number {
    const kept = [this.config.retention.done];
    for (const o of this.config.overrides) {
      if (o.retention.done !== undefined) kept.push(o.retention.done);
    }
    const grain = GRAIN_MS[this.config.grain];
    return Math.min(Math.max(...kept) + grain, grain * MAX_PARTITIONS_AHEAD);
  }

  async run(stopping: () => boolean): Promise<ArchivePass> {
    const created = await ARCHIVE_EXTEND.run(this.sql, {
      aheadMs: this.aheadMs(),
      grain: this.config.grain,
    });
    const dropped = await ARCHIVE_DROP_EXPIRED.run(this.sql, {});
    let instances = 0;
    let history = 0;
    let chunks = 0;
    for (;;) {
      const batch = await ARCHIVE_MOVE.run(this.sql, {
        afterMs: this.config.afterMs,
        limit: this.config.batch,
        retention: this.config.retention,
        overrides: this.config.overrides,
      });
      instances += batch.instances;
      history += batch.history;
      chunks += batch.chunks;
      if (batch.instances < this.config.batch || stopping()) break;
    }
    return { created, dropped, moved: { instances, history, chunks } };
  }
}
