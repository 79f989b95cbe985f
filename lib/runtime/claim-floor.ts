import type { ClaimStart } from '../sql/claim.sql';

/**
 * How far behind the floor a bounded claim starts scanning (docs/design.md §5.3.1): rows that
 * became runnable at a position this much older than the last claim's head (a writer whose
 * commit lagged its `now()`, a retry that lands a little in the past) are still found by the
 * next bounded claim.
 */
export const CLAIM_FLOOR_SLACK_MS = 250;

/**
 * The floor engages only once full scans have grown this slow on the server (ms, each of the
 * last {@link ENGAGE_SCANS}): in a table whose dead index entries are being pruned a full scan
 * costs what a bounded one does, and every claim scans from the head, in exact
 * `(priority, eligible_at)` order. Full scans this slow, one after another, mean something
 * pins the xmin horizon; one fast full scan disengages it.
 */
export const FLOOR_ENGAGE_MS = 10;

/** How many full scans in a row must be slow to engage the floor. */
export const ENGAGE_SCANS = 3;

/**
 * While engaged, full scans may cost at most 1/this of the queue's time: after a full scan
 * that took `d` ms, the queue claims from the floor for `d × 100` ms (1 %).
 */
export const FULL_SCAN_BUDGET = 100;

/**
 * The longest a queue claims with a floor before it scans from the head again, whatever a full
 * scan costs: the bound on how long a row made runnable behind the floor (below) can wait.
 */
export const FULL_SCAN_MAX_GAP_MS = 600_000;

/**
 * One queue's claim floor (docs/design.md §5.3.1): where in the pick index's
 * `(priority, eligible_at)` order the oldest runnable row stood at the last claim, so the
 * next claim seeks there instead of walking, from the head of the index, the entries of rows
 * that already left `runnable`. Under a pinned xmin horizon those entries cannot be pruned
 * and every scan from the head visits each one's heap tuple; from the floor, a claim visits
 * only those of the last {@link CLAIM_FLOOR_SLACK_MS} and since its previous claim.
 *
 * It engages only when full scans have grown slow ({@link FLOOR_ENGAGE_MS}): until then every
 * claim scans from the head. Once engaged, rows that become runnable behind the floor (a
 * reaped or released row keeps its place, a held row is released, an insert with a past
 * `runAt` or in a host transaction that commits late, a more urgent priority than the head's,
 * priority aging) are found by the next full scan from the head, which runs as soon as its cost budget allows
 * ({@link FULL_SCAN_BUDGET}, at least every {@link FULL_SCAN_MAX_GAP_MS}): about once a second
 * when full scans take 10 ms, every 10 minutes (the most) past 6 s. The scheduler runs it then when its last claim came back short
 * ({@link fullScanDelay}). A release of this node's claims resets the floor.
 */
export class ClaimFloor {
  /** The head's position as the last claim saw it, or undefined before the first. */
  private priority: number | undefined;
  private at: Date | undefined;
  private lastFullAt = Number.NEGATIVE_INFINITY;
  private lastFullMs = 0;
  /** Full scans in a row that took at least {@link FLOOR_ENGAGE_MS}. */
  private slowScans = 0;
  private fullNext = true;
  /** The last claim started at the floor: rows behind it are owed a full scan. */
  private owed = false;

  /** Where the next claim starts, or undefined for a full scan from the head. */
  start(nowMs: number): ClaimStart | undefined {
    if (this.fullNext || this.priority === undefined || this.at === undefined) return undefined;
    if (this.slowScans < ENGAGE_SCANS) return undefined;
    const gap = nowMs - this.lastFullAt;
    if (gap >= FULL_SCAN_MAX_GAP_MS || gap >= this.lastFullMs * FULL_SCAN_BUDGET) return undefined;
    return {
      priority: this.priority,
      scanFrom: new Date(this.at.getTime() - CLAIM_FLOOR_SLACK_MS),
      headFrom: this.at,
    };
  }

  /**
   * A claim came back: `head` is the oldest runnable row it saw (or undefined when it saw
   * none), `dbNow` the statement's `now()`; `full` and `durationMs` (its server-side time)
   * describe the claim.
   */
  learn(
    head: { readonly priority: number; readonly at: Date } | undefined,
    dbNow: Date,
    full: boolean,
    durationMs: number,
    nowMs: number,
  ): void {
    if (head !== undefined) {
      this.priority = head.priority;
      this.at = head.at;
    } else {
      // Nothing runnable from the start on: the floor is the statement's now, at the level
      // the queue last worked at (rows of a more urgent level wait for the next full scan).
      this.priority ??= 0;
      this.at = dbNow;
    }
    this.owed = !full;
    if (full) {
      this.fullNext = false;
      this.lastFullAt = nowMs;
      this.lastFullMs = durationMs;
      this.slowScans = durationMs >= FLOOR_ENGAGE_MS ? this.slowScans + 1 : 0;
    }
  }

  /**
   * After a claim from the floor, in how many ms the budget allows the full scan that finds
   * rows behind it; undefined when the last claim was a full scan. The scheduler runs one
   * then when its last claim came back short, so a row behind the floor never waits for a
   * poll or a poke that may not come.
   */
  fullScanDelay(nowMs: number): number | undefined {
    if (!this.owed) return undefined;
    const gap = Math.min(FULL_SCAN_MAX_GAP_MS, this.lastFullMs * FULL_SCAN_BUDGET);
    return Math.max(0, this.lastFullAt + gap - nowMs);
  }

  /** Rows of this queue went back to runnable behind the floor: the next claim scans fully. */
  reset(): void {
    this.fullNext = true;
  }
}
