import type { SqlExecutor } from '../db/sql-executor';
import type { Retention, RetentionOverride } from '../fsm/retention';
import {
  ARCHIVE_DROP_EXPIRED,
  ARCHIVE_EXTEND,
  ARCHIVE_MOVE,
  type ArchiveMoved,
} from '../sql/archive.sql';
import { SweepFloor } from './sweep-floor';

/** Partitions created ahead at most: a longer retention keeps its rows hot past this horizon. */
export const MAX_PARTITIONS_AHEAD = 400;

const GRAIN_MS = { hour: 3_600_000, day: 86_400_000 } as const;

/**
 * How far behind the previous pass's cutoff (`now() - archiveAfter`) the next one starts
 * (docs/archive.md): a row's `updated_at` is its ending transaction's `now()`, so only an end
 * committed more than this late (a long transactional step) lands behind the floor and waits
 * for the next full pass. Each bounded pass re-walks the entries of this much time that the
 * pass before moved (dead under a pinned horizon), so it is kept short.
 */
export const ARCHIVE_FLOOR_SLACK_MS = 5_000;

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
 * The periodic passes walk from a floor ({@link SweepFloor}: the previous complete pass's
 * cutoff less {@link ARCHIVE_FLOOR_SLACK_MS}, lowered to the end of a `done` parent whose
 * children it moved), the first and every tenth one in full; a row left in range (locked, a
 * live parent, children still hot, a key or dedup window, an expiry beyond the partitions) is
 * moved by a later full pass.
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

  private readonly floor = new SweepFloor(ARCHIVE_FLOOR_SLACK_MS);

  /** The ms ahead of now the partitions must cover. */
  aheadMs(): number {
    const kept = [this.config.retention.done];
    for (const o of this.config.overrides) {
      if (o.retention.done !== undefined) kept.push(o.retention.done);
    }
    const grain = GRAIN_MS[this.config.grain];
    return Math.min(Math.max(...kept) + grain, grain * MAX_PARTITIONS_AHEAD);
  }

  /**
   * One pass: `'full'` walks every ended row; `'floor'` (the GC's periodic sweep) walks from
   * where the floor says, in full when it says so.
   */
  async run(stopping: () => boolean, scan: 'floor' | 'full' = 'full'): Promise<ArchivePass> {
    const created = await ARCHIVE_EXTEND.run(this.sql, {
      aheadMs: this.aheadMs(),
      grain: this.config.grain,
    });
    const dropped = await ARCHIVE_DROP_EXPIRED.run(this.sql, {});
    const from = scan === 'full' ? null : this.floor.start();
    // Each batch after the first starts at the latest end the one before moved (the rows before
    // it that stayed were passed over by this pass already), or at the end of a `done` parent
    // of a row it moved, if earlier (docs/archive.md).
    let batchFrom = from;
    let instances = 0;
    let history = 0;
    let chunks = 0;
    let parentsAt: Date | undefined;
    for (;;) {
      const batch = await ARCHIVE_MOVE.run(this.sql, {
        afterMs: this.config.afterMs,
        limit: this.config.batch,
        retention: this.config.retention,
        overrides: this.config.overrides,
        from: batchFrom,
      });
      if (batch.lastAt !== undefined && (batchFrom === null || batch.lastAt > batchFrom)) {
        batchFrom = batch.lastAt;
      }
      // …unless a `done` parent of a row it moved ended before that: it may go now.
      if (batchFrom !== null && batch.parentsAt !== undefined && batch.parentsAt < batchFrom) {
        batchFrom = batch.parentsAt;
      }
      instances += batch.instances;
      history += batch.history;
      chunks += batch.chunks;
      if (
        batch.parentsAt !== undefined &&
        (parentsAt === undefined || batch.parentsAt < parentsAt)
      ) {
        parentsAt = batch.parentsAt;
      }
      const short = batch.instances < this.config.batch;
      if (short || stopping()) {
        this.floor.learn(from, {
          cutoff: new Date(batch.dbNow.getTime() - this.config.afterMs),
          complete: short,
          left: parentsAt,
        });
        break;
      }
    }
    return { created, dropped, moved: { instances, history, chunks } };
  }
}
