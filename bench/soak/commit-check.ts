/**
 * The soak's end-of-run verdict on commits (docs/performance.md, "Soak"), from the counts of the
 * table's soak3 rows. Pure. Lost: an inserted instance with no row, ended other than `done`, or
 * done without every step in its trail. Duplicated: more rows than inserts, or a trail longer
 * than the steps it passed. Unfinished: still live when the drain time ran out (slow, not lost).
 */
export interface RowCounts {
  /** Ids insertAll answered. */
  readonly inserted: number;
  readonly rows: number;
  readonly done: number;
  /** Done with the trail a, b, c exactly. */
  readonly exact: number;
  /** Rows whose trail is longer than the steps they passed (a step recorded twice). */
  readonly long: number;
  /** Rows still live (not done, failed or cancelled). */
  readonly live: number;
}

export interface CommitCheck {
  readonly lost: number;
  readonly duplicated: number;
  readonly unfinished: number;
}

export function checkCommits(c: RowCounts): CommitCheck {
  return {
    lost: Math.max(0, c.inserted - c.exact - c.long - c.live),
    duplicated: c.long + Math.max(0, c.rows - c.inserted),
    unfinished: c.live,
  };
}
