import { type ClaimHead, type ClaimStart, headBefore } from '../sql/claim.sql';

/**
 * How far behind the floor bounded claims reach (docs/design.md §5.3.1): a row that became
 * runnable at a position up to this much older than the last claim's head (a writer whose
 * commit lagged its `now()`, a retry that lands a little in the past) is found by a bounded
 * claim, by the next one when it is at most {@link FLOOR_NEAR_SLACK_MS} older, else by the
 * first wide one ({@link FLOOR_WIDE_EVERY_MS}) after its commit.
 */
export const CLAIM_FLOOR_SLACK_MS = 250;

/**
 * How far behind the floor most bounded claims start: a commit's usual lag behind its writer's
 * `now()`. Under a pin every dead entry of this range is visited by every claim, so it is kept
 * short; the rest of {@link CLAIM_FLOOR_SLACK_MS} is the wide claims' ({@link FLOOR_WIDE_EVERY_MS}).
 */
export const FLOOR_NEAR_SLACK_MS = 50;

/**
 * A bounded claim at least this many ms (this node's clock) after the last wide one is wide: it
 * starts `CLAIM_FLOOR_SLACK_MS + FLOOR_WIDE_EVERY_MS` behind the floor. A row that became
 * visible up to {@link CLAIM_FLOOR_SLACK_MS} behind the floor stands, at the next wide claim (at
 * most this much later, when the floor is at most the database's now), within its reach.
 */
export const FLOOR_WIDE_EVERY_MS = 125;

/**
 * The floor engages only once full scans have grown this slow on the server (ms, each of the
 * last {@link ENGAGE_SCANS}): in a table whose dead index entries are being pruned a full scan
 * costs what a bounded one does, and every claim scans from the head, in exact
 * `(priority, eligible_at)` order. Full scans this slow, one after another, mean something
 * pins the xmin horizon; one fast look behind the floor that found nothing (it walked the same
 * entries as a full scan) disengages it.
 */
export const FLOOR_ENGAGE_MS = 10;

/** How many full scans in a row must be slow to engage the floor. */
export const ENGAGE_SCANS = 3;

/**
 * A transaction that took an id and stays open pins the horizon, and the claim sees it: its
 * snapshot's `xmax − xmin` (the claim's `pinXids`) counts the ids assigned since it began.
 * A full scan that reports at least this many, and took at least {@link PIN_SCAN_MS}, engages
 * the floor at once, without waiting for {@link ENGAGE_SCANS} scans of
 * {@link FLOOR_ENGAGE_MS}: at a few hundred write transactions a second that is under a
 * second into the pin, when a full scan has walked a few hundred dead entries, where the slow
 * scans took most of a minute to arrive (docs/performance.md, "Soak"). Without a pin the span
 * is the handful of transactions in flight.
 */
export const PIN_XIDS = 100;

/**
 * The least server time of a full scan that engages the floor on {@link PIN_XIDS}: a pin over a
 * queue whose head is cheap to walk (a small or quiet table) leaves it scanning from the head.
 */
export const PIN_SCAN_MS = 0.5;

/**
 * The pins without an id of their own (a REPEATABLE READ reader, `pg_dump`, a standby's
 * feedback, a replication slot) are not in a claim's snapshot: a full scan of at least
 * {@link PIN_SCAN_MS} looks at the horizon's holders instead (the claim's `horizonXids`, about
 * 0.1 ms on the server), at most once per this many ms per queue. One that finds a holder
 * {@link PIN_XIDS} or more ids old engages the floor; every look behind the floor reads the
 * holders again, and the first that finds none that old disengages it (a fast look alone does
 * not: under a young pin the range behind is cheap to walk, and grows).
 */
export const HORIZON_CHECK_GAP_MS = 1_000;

/**
 * While engaged, the look behind the floor ({@link ClaimFloor.probeFrom}) may cost at most
 * 1/this of the queue's time: after one that took `d` ms, the next comes `d × 100` ms later (1 %).
 */
export const PROBE_BUDGET = 100;

/**
 * The longest an engaged floor goes without a look behind itself, whatever one costs: the
 * bound on how long a row made runnable behind the floor (below) can wait.
 */
export const PROBE_MAX_GAP_MS = 600_000;

/** A place in the pick index's `(priority, eligible_at)` order. */
type Place = ClaimHead;

/**
 * One queue's claim floor (docs/design.md §5.3.1): where in the pick index's
 * `(priority, eligible_at)` order the oldest runnable row stood at the last claim, so the
 * next claim seeks there instead of walking, from the head of the index, the entries of rows
 * that already left `runnable`. Under a pinned xmin horizon those entries cannot be pruned
 * and every scan from the head visits each one's heap tuple; from the floor, a claim visits
 * only those of the last {@link FLOOR_NEAR_SLACK_MS} (of the last
 * `CLAIM_FLOOR_SLACK_MS + FLOOR_WIDE_EVERY_MS` for a wide one) and since its previous claim.
 *
 * It engages only when full scans have grown slow ({@link FLOOR_ENGAGE_MS}), or at once when a
 * claim sees the transaction that pins the horizon ({@link PIN_XIDS}) or a holder of it without
 * an id ({@link HORIZON_CHECK_GAP_MS}): until then every claim scans from the head. Once engaged, every claim starts at the floor, and rows that
 * become runnable behind it (a reaped row keeps its place, a held row is released, an insert
 * with a past `runAt` or in a host transaction that commits late, a more urgent priority than
 * the head's, priority aging) are found by a read-only look behind the floor
 * (PROBE_BEHIND_FLOOR) that the claim loop runs beside its claims, never instead of one, as
 * often as its cost budget allows ({@link PROBE_BUDGET}, at least every
 * {@link PROBE_MAX_GAP_MS}); what it finds puts the floor back ({@link lower}). Rows this
 * node releases put it back at once, to the earliest of them, and so do rows inserted on this
 * node before it ({@link inserted}). A fast look behind means the
 * horizon moved on: the floor disengages and the next claim scans from the head again.
 */
export class ClaimFloor {
  /** The head's position as the last claim saw it, or undefined before the first. */
  private place: Place | undefined;
  /** The last look behind (or, before one, the last full scan): when, and what it cost. */
  private lastLookAt = Number.NEGATIVE_INFINITY;
  private lastLookMs = 0;
  /** Full scans in a row that took at least {@link FLOOR_ENGAGE_MS}. */
  private slowScans = 0;
  /**
   * Engaged by a pin the claim saw ({@link PIN_XIDS}); until a claim's snapshot no longer
   * shows it.
   */
  private pinned = false;
  /**
   * Engaged by a holder of the horizon without an id ({@link HORIZON_CHECK_GAP_MS}); until a
   * look behind the floor no longer finds one.
   */
  private heldByHolder = false;
  /** When a claim last looked at the horizon's holders ({@link HORIZON_CHECK_GAP_MS}). */
  private lastHorizonAt = Number.NEGATIVE_INFINITY;
  /**
   * The earliest place the floor was put back to since the claim in flight started: that
   * claim's answer (from a later start) must not lift the floor past it.
   */
  private loweredTo: Place | undefined;
  /** When the last wide claim started ({@link FLOOR_WIDE_EVERY_MS}), this node's clock. */
  private lastWideAt = Number.NEGATIVE_INFINITY;

  /** The floor is engaged: claims start at it, and looks behind it are due. */
  get engaged(): boolean {
    return (
      (this.slowScans >= ENGAGE_SCANS || this.pinned || this.heldByHolder) &&
      this.place !== undefined
    );
  }

  /**
   * Where the next claim, starting at `nowMs`, starts, or undefined for a full scan from the
   * head: {@link FLOOR_NEAR_SLACK_MS} behind the floor, or further when it is a wide one
   * ({@link FLOOR_WIDE_EVERY_MS}).
   */
  start(nowMs: number = Date.now()): ClaimStart | undefined {
    this.loweredTo = undefined;
    if (!this.engaged) return undefined;
    const { priority, at } = this.place!;
    const wide = nowMs - this.lastWideAt >= FLOOR_WIDE_EVERY_MS;
    if (wide) this.lastWideAt = nowMs;
    const slack = wide ? CLAIM_FLOOR_SLACK_MS + FLOOR_WIDE_EVERY_MS : FLOOR_NEAR_SLACK_MS;
    return { priority, scanFrom: new Date(at.getTime() - slack), headFrom: at };
  }

  /**
   * A claim came back: `head` is the oldest runnable row it saw (or undefined when it saw
   * none), `dbNow` the statement's `now()`; `full` and `durationMs` (its server-side time)
   * describe the claim, `pinXids` what its snapshot showed of an open transaction
   * ({@link PIN_XIDS}), and `horizonXids`, when it looked, the age of the horizon's oldest
   * holder ({@link HORIZON_CHECK_GAP_MS}).
   */
  learn(
    head: Place | undefined,
    dbNow: Date,
    full: boolean,
    durationMs: number,
    nowMs: number,
    pinXids = 0,
    horizonXids?: number,
  ): void {
    // Nothing runnable from the start on: the floor is the statement's now, at the level the
    // queue last worked at (rows of a more urgent level wait for the next look behind).
    let next: Place = head ?? { priority: this.place?.priority ?? 0, at: dbNow };
    if (this.loweredTo !== undefined && headBefore(this.loweredTo, next)) next = this.loweredTo;
    this.loweredTo = undefined;
    this.place = next;
    // Any claim's snapshot says whether the transaction that pinned the horizon is still open;
    // only a full scan's time says whether the head has grown costly to walk.
    if (pinXids < PIN_XIDS) this.pinned = false;
    if (full) {
      const wasEngaged = this.engaged;
      this.slowScans = durationMs >= FLOOR_ENGAGE_MS ? this.slowScans + 1 : 0;
      if (pinXids >= PIN_XIDS && durationMs >= PIN_SCAN_MS) this.pinned = true;
      if (horizonXids !== undefined) {
        this.lastHorizonAt = nowMs;
        if (horizonXids >= PIN_XIDS && durationMs >= PIN_SCAN_MS) this.heldByHolder = true;
      }
      if (!wasEngaged) {
        this.lastLookAt = nowMs;
        this.lastLookMs = durationMs;
      }
    }
  }

  /**
   * Rows of this queue became runnable at `place` (released, or found behind the floor): the
   * floor goes back to it if it stood later, and a claim in flight cannot lift it past it.
   */
  lower(place: Place): void {
    if (this.place !== undefined && headBefore(place, this.place)) this.place = place;
    if (this.loweredTo === undefined || headBefore(place, this.loweredTo)) this.loweredTo = place;
  }

  /**
   * A row of this queue was inserted on this node, runnable and due, at `priority`, eligible at
   * `at` (a past `runAt`), or null for the insert's now: the floor goes back to it when it
   * stands before the floor. A row due now at the floor's priority or a less urgent one stands
   * after it; one of a more urgent priority puts the floor at the start of that priority (its
   * `eligible_at` is the database's now, which this node's clock does not give exactly).
   */
  inserted(priority: number, at: Date | null): void {
    if (this.place === undefined) return;
    if (at !== null) this.lower({ priority, at });
    else if (priority < this.place.priority) this.lower({ priority, at: new Date(0) });
  }

  /**
   * What the next claim is asked about the horizon's holders: look when it ran at least this
   * many ms, or undefined not to look (engaged, or a look less than
   * {@link HORIZON_CHECK_GAP_MS} ago).
   */
  horizonCheckMs(nowMs: number): number | undefined {
    if (this.engaged || nowMs - this.lastHorizonAt < HORIZON_CHECK_GAP_MS) return undefined;
    return PIN_SCAN_MS;
  }

  /** Where a look behind the floor searches before (the floor less its slack); undefined unless engaged. */
  probeFrom(): Place | undefined {
    if (!this.engaged) return undefined;
    const { priority, at } = this.place!;
    return { priority, at: new Date(at.getTime() - CLAIM_FLOOR_SLACK_MS) };
  }

  /**
   * A look behind the floor came back: what it found (then the floor goes back to it), and
   * its server-side time. A fast one that found nothing walked the whole range a full scan
   * walks: the horizon moved on, the floor disengages and the next claim scans fully. (One that
   * found a row stopped there: its time says nothing of the range.) A floor engaged by a pin
   * its claims still see ({@link PIN_XIDS}) stays engaged: the range grows as long as the pin
   * lasts, and a full scan of it every few looks would cost the claims more than the looks do.
   * `horizonXids`, the horizon's oldest holder as the look saw it, keeps a floor engaged by a
   * holder ({@link HORIZON_CHECK_GAP_MS}) while it is {@link PIN_XIDS} old, and ends it when not.
   */
  learnProbe(
    found: Place | undefined,
    durationMs: number,
    nowMs: number,
    horizonXids?: number,
  ): void {
    this.lastLookAt = nowMs;
    this.lastLookMs = durationMs;
    if (horizonXids !== undefined) this.heldByHolder = horizonXids >= PIN_XIDS;
    if (found !== undefined) this.lower(found);
    else if (durationMs < FLOOR_ENGAGE_MS) this.slowScans = 0;
  }

  /**
   * In how many ms the next look behind the floor is due ({@link PROBE_BUDGET}, at most
   * {@link PROBE_MAX_GAP_MS} after the last), or undefined while the floor is not engaged.
   */
  probeDelay(nowMs: number): number | undefined {
    if (!this.engaged) return undefined;
    const gap = Math.min(PROBE_MAX_GAP_MS, this.lastLookMs * PROBE_BUDGET);
    return Math.max(0, this.lastLookAt + gap - nowMs);
  }
}
