import {
  CLAIM_FLOOR_SLACK_MS,
  ClaimFloor,
  ENGAGE_SCANS,
  FLOOR_ENGAGE_MS,
  FULL_SCAN_BUDGET,
  FULL_SCAN_MAX_GAP_MS,
} from '../../lib/runtime/claim-floor';

// The claim floor's bookkeeping (docs/design.md §5.3.1), on a clock the test drives: when a
// claim starts at the floor, when it scans from the head of the index, and what it learns.

/** A floor engaged by ENGAGE_SCANS full scans of `ms` each, the last at `at`. */
function engaged(
  ms: number,
  at: number,
  head: { priority: number; at: Date },
  dbNow: Date,
): ClaimFloor {
  const floor = new ClaimFloor();
  for (let k = ENGAGE_SCANS - 1; k >= 0; k--) floor.learn(head, dbNow, true, ms, at - k);
  return floor;
}

describe('ClaimFloor', () => {
  const t0 = 1_000_000;
  const headAt = new Date('2026-12-05T01:00:00.000Z');
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('scans fully while full scans are cheap, or slow only now and then: every claim in exact order', () => {
    const floor = new ClaimFloor();
    for (let k = 0; k < 20; k++) {
      expect(floor.start(t0 + k)).toBeUndefined();
      // Slow scans among cheap ones, never ENGAGE_SCANS in a row, do not engage it.
      const ms = k % ENGAGE_SCANS === 0 ? FLOOR_ENGAGE_MS / 2 : FLOOR_ENGAGE_MS * 3;
      floor.learn({ priority: 0, at: headAt }, dbNow, true, ms, t0 + k);
    }
    expect(floor.start(t0 + 21)).toBeUndefined();
  });

  it('engages after ENGAGE_SCANS slow full scans in a row, and one fast one disengages it', () => {
    const floor = new ClaimFloor();
    for (let k = 0; k < ENGAGE_SCANS; k++) {
      expect(floor.start(t0 + k)).toBeUndefined();
      floor.learn({ priority: 0, at: headAt }, dbNow, true, FLOOR_ENGAGE_MS, t0 + k);
    }
    expect(floor.start(t0 + ENGAGE_SCANS)).toBeDefined();
    floor.reset();
    floor.learn({ priority: 0, at: headAt }, dbNow, true, 1, t0 + 10_000);
    expect(floor.start(t0 + 10_001)).toBeUndefined();
  });

  it('scans fully until it has seen a head, then starts at the head less its slack', () => {
    expect(new ClaimFloor().start(t0)).toBeUndefined();
    const floor = engaged(40, t0, { priority: 2, at: headAt }, dbNow);
    expect(floor.start(t0 + 1)).toEqual({
      priority: 2,
      scanFrom: new Date(headAt.getTime() - CLAIM_FLOOR_SLACK_MS),
      headFrom: headAt,
    });
  });

  it('scans fully again once the last full scan fits its budget', () => {
    const floor = engaged(10, t0, { priority: 0, at: headAt }, dbNow);
    expect(floor.start(t0 + 10 * FULL_SCAN_BUDGET - 1)).toBeDefined();
    expect(floor.start(t0 + 10 * FULL_SCAN_BUDGET)).toBeUndefined();
    // A bounded claim does not restart the budget; a full one does.
    floor.learn({ priority: 0, at: headAt }, dbNow, false, 1, t0 + 10 * FULL_SCAN_BUDGET);
    expect(floor.start(t0 + 10 * FULL_SCAN_BUDGET)).toBeUndefined();
    floor.learn({ priority: 0, at: headAt }, dbNow, true, 10, t0 + 10 * FULL_SCAN_BUDGET);
    expect(floor.start(t0 + 10 * FULL_SCAN_BUDGET + 1)).toBeDefined();
  });

  it('never goes longer than the maximum gap without a full scan, however costly', () => {
    const floor = engaged(10_000, t0, { priority: 0, at: headAt }, dbNow);
    expect(floor.start(t0 + FULL_SCAN_MAX_GAP_MS - 1)).toBeDefined();
    expect(floor.start(t0 + FULL_SCAN_MAX_GAP_MS)).toBeUndefined();
  });

  it('a claim that saw no runnable row puts the floor at the statement’s now, at the level it knew', () => {
    const floor = engaged(1_000, t0, { priority: 5, at: headAt }, dbNow);
    floor.learn(undefined, dbNow, false, 1, t0 + 1);
    expect(floor.start(t0 + 2)).toMatchObject({ priority: 5, headFrom: dbNow });
    const fresh = new ClaimFloor();
    for (let k = 0; k < ENGAGE_SCANS; k++) fresh.learn(undefined, dbNow, true, 1_000, t0 + k);
    expect(fresh.start(t0 + ENGAGE_SCANS)).toMatchObject({ priority: 0, headFrom: dbNow });
  });

  it('a reset makes the next claim a full scan', () => {
    const floor = engaged(1_000, t0, { priority: 0, at: headAt }, dbNow);
    expect(floor.start(t0 + 1)).toBeDefined();
    floor.reset();
    expect(floor.start(t0 + 1)).toBeUndefined();
    floor.learn({ priority: 0, at: headAt }, dbNow, true, 1_000, t0 + 2);
    expect(floor.start(t0 + 3)).toBeDefined();
  });
});

describe('ClaimFloor.fullScanDelay', () => {
  const t0 = 1_000_000;
  const headAt = new Date('2026-12-05T01:00:00.000Z');
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('owes a full scan after a claim from the floor, due when the budget allows', () => {
    const floor = engaged(20, t0, { priority: 0, at: headAt }, dbNow);
    expect(floor.fullScanDelay(t0 + 1)).toBeUndefined();
    floor.learn({ priority: 0, at: headAt }, dbNow, false, 1, t0 + 10);
    expect(floor.fullScanDelay(t0 + 10)).toBe(20 * FULL_SCAN_BUDGET - 10);
    expect(floor.fullScanDelay(t0 + 5_000)).toBe(0);
    floor.learn({ priority: 0, at: headAt }, dbNow, true, 20, t0 + 5_000);
    expect(floor.fullScanDelay(t0 + 5_000)).toBeUndefined();
  });
});
