/**
 * At least every this many sweeps, one is full (no floor): the first sweep, then every tenth.
 * A row left behind a floor (its lock held by a transaction that then rolled back, a parent
 * that was live) waits for it: at most 10 × the sweep's interval.
 */
export const FULL_SWEEP_EVERY = 10;

/** What one sweep saw, for the floor of the next one. */
export interface SweepSeen {
  /** The upper end of the range it scanned, in the database's time (its `now()`-based cutoff). */
  readonly cutoff: Date;
  /** It took every row it found in range (fewer than its limit, and not stopped half way). */
  readonly complete: boolean;
  /** The lowest position of a row in range it saw but left (to be taken by the next sweep). */
  readonly left?: Date;
}

/**
 * Where a periodic sweep over a time-ordered index starts, and when it must be full: the
 * reaper over gen_durable_lease (docs/design.md §17.2), the archive's move over gen_durable_gc
 * (docs/archive.md). Under a pinned xmin horizon the index entries of rows that left the
 * sweep's range cannot be pruned, and a scan from the low end of the index visits each one's
 * heap tuple; a scan from the floor visits only those since the previous sweep and its slack.
 *
 * After a complete sweep the floor is its cutoff minus `slackMs` (rows written by a
 * transaction whose `now()` lagged its commit), lowered to the lowest row it saw but left.
 * After an incomplete sweep the next one starts where it did. The first sweep, and at least
 * every {@link FULL_SWEEP_EVERY}-th one, is full: it finds the rows left behind a floor.
 */
export class SweepFloor {
  private floor: Date | undefined;
  /** Sweeps started since the last full one. */
  private sinceFull = 0;

  constructor(
    private readonly slackMs: number,
    private readonly fullEvery = FULL_SWEEP_EVERY,
  ) {}

  /** Where the next sweep's scan starts, or null for a full sweep (from the low end). */
  start(): Date | null {
    if (this.floor === undefined || this.sinceFull + 1 >= this.fullEvery) return null;
    return this.floor;
  }

  /** A sweep that started at `from` (null: full) ended having seen `seen`. */
  learn(from: Date | null, seen: SweepSeen): void {
    this.sinceFull = from === null ? 0 : this.sinceFull + 1;
    if (!seen.complete) {
      this.floor = from ?? undefined;
      return;
    }
    const next = seen.cutoff.getTime() - this.slackMs;
    this.floor = new Date(seen.left === undefined ? next : Math.min(next, seen.left.getTime()));
  }
}
