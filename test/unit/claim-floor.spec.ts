import {
  CLAIM_FLOOR_SLACK_MS,
  ClaimFloor,
  ENGAGE_SCANS,
  FLOOR_ENGAGE_MS,
  FLOOR_NEAR_SLACK_MS,
  FLOOR_WIDE_EVERY_MS,
  HORIZON_CHECK_GAP_MS,
  PIN_SCAN_MS,
  PIN_XIDS,
  PROBE_BUDGET,
  PROBE_MAX_GAP_MS,
} from '../../lib/runtime/claim-floor';

// The claim floor's bookkeeping (docs/design.md §5.3.1), on a clock the test drives: when a
// claim starts at the floor, when it scans from the head of the index, what it learns, and
// when its look behind itself is due.

/** A floor engaged by ENGAGE_SCANS full scans of `ms` each, the last at `at`. */
function engaged(
  ms: number,
  at: number,
  head: { priority: number; at: Date },
  dbNow: Date,
): ClaimFloor {
  const floor = new ClaimFloor();
  for (let k = ENGAGE_SCANS - 1; k >= 0; k--) {
    floor.start();
    floor.learn(head, dbNow, true, ms, at - k);
  }
  return floor;
}

describe('ClaimFloor', () => {
  const t0 = 1_000_000;
  const headAt = new Date('2026-12-05T01:00:00.000Z');
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('scans fully while full scans are cheap, or slow only now and then: every claim in exact order', () => {
    const floor = new ClaimFloor();
    for (let k = 0; k < 20; k++) {
      expect(floor.start()).toBeUndefined();
      // Slow scans among cheap ones, never ENGAGE_SCANS in a row, do not engage it.
      const ms = k % ENGAGE_SCANS === 0 ? FLOOR_ENGAGE_MS / 2 : FLOOR_ENGAGE_MS * 3;
      floor.learn({ priority: 0, at: headAt }, dbNow, true, ms, t0 + k);
    }
    expect(floor.start()).toBeUndefined();
    expect(floor.probeDelay(t0 + 21)).toBeUndefined();
  });

  it('engages after ENGAGE_SCANS slow full scans in a row; then every claim starts at the head less its slack', () => {
    expect(new ClaimFloor().start()).toBeUndefined();
    const floor = engaged(40, t0, { priority: 2, at: headAt }, dbNow);
    expect(floor.engaged).toBe(true);
    const wide = {
      priority: 2,
      scanFrom: new Date(headAt.getTime() - CLAIM_FLOOR_SLACK_MS - FLOOR_WIDE_EVERY_MS),
      headFrom: headAt,
    };
    // However long since the last full scan: the floor's look behind does that job. A claim
    // FLOOR_WIDE_EVERY_MS or more after the last wide one is wide.
    for (const later of [1, PROBE_MAX_GAP_MS, 10 * PROBE_MAX_GAP_MS]) {
      expect(floor.start(t0 + later)).toEqual(wide);
      floor.learn({ priority: 2, at: headAt }, dbNow, false, 1, t0 + later);
    }
  });

  it('engaged, claims start FLOOR_NEAR_SLACK_MS behind the floor, and one at least every FLOOR_WIDE_EVERY_MS reaches CLAIM_FLOOR_SLACK_MS further', () => {
    const floor = engaged(40, t0, { priority: 0, at: headAt }, dbNow);
    const slackOf = (nowMs: number): number =>
      headAt.getTime() - floor.start(nowMs)!.scanFrom.getTime();
    const wide = CLAIM_FLOOR_SLACK_MS + FLOOR_WIDE_EVERY_MS;
    expect(slackOf(t0)).toBe(wide);
    expect(slackOf(t0 + 10)).toBe(FLOOR_NEAR_SLACK_MS);
    expect(slackOf(t0 + FLOOR_WIDE_EVERY_MS - 1)).toBe(FLOOR_NEAR_SLACK_MS);
    expect(slackOf(t0 + FLOOR_WIDE_EVERY_MS)).toBe(wide);
    expect(slackOf(t0 + FLOOR_WIDE_EVERY_MS + 1)).toBe(FLOOR_NEAR_SLACK_MS);
    // A wide claim after a pause: the gap counts from the last wide one, not the last claim.
    expect(slackOf(t0 + 10 * FLOOR_WIDE_EVERY_MS)).toBe(wide);
  });

  it('a claim that saw no runnable row puts the floor at the statement’s now, at the level it knew', () => {
    const floor = engaged(1_000, t0, { priority: 5, at: headAt }, dbNow);
    floor.start();
    floor.learn(undefined, dbNow, false, 1, t0 + 1);
    expect(floor.start()).toMatchObject({ priority: 5, headFrom: dbNow });
    const fresh = new ClaimFloor();
    for (let k = 0; k < ENGAGE_SCANS; k++) fresh.learn(undefined, dbNow, true, 1_000, t0 + k);
    expect(fresh.start()).toMatchObject({ priority: 0, headFrom: dbNow });
  });

  it('a release puts the floor back to the earliest released place, never forward', () => {
    const floor = engaged(1_000, t0, { priority: 1, at: headAt }, dbNow);
    const earlier = new Date(headAt.getTime() - 60_000);
    floor.lower({ priority: 1, at: earlier });
    expect(floor.start()).toMatchObject({ priority: 1, headFrom: earlier });
    floor.lower({ priority: 1, at: headAt });
    expect(floor.start()).toMatchObject({ priority: 1, headFrom: earlier });
    // A more urgent level is earlier whatever its time.
    floor.lower({ priority: 0, at: dbNow });
    expect(floor.start()).toMatchObject({ priority: 0, headFrom: dbNow });
  });

  it('a claim in flight when the floor went back cannot lift it past that place', () => {
    const floor = engaged(1_000, t0, { priority: 0, at: headAt }, dbNow);
    const behind = new Date(headAt.getTime() - 3_600_000);
    floor.start();
    // The look behind finds a row while a claim from the old floor is in flight…
    floor.learnProbe({ priority: 0, at: behind }, 2_000, t0 + 1);
    // …whose answer (a later head) comes back after it.
    floor.learn({ priority: 0, at: dbNow }, dbNow, false, 1, t0 + 2);
    expect(floor.start()).toMatchObject({ headFrom: behind });
    // The claim that started from the lowered floor teaches the next floor as usual.
    floor.learn({ priority: 0, at: dbNow }, dbNow, false, 1, t0 + 3);
    expect(floor.start()).toMatchObject({ headFrom: dbNow });
  });

  it('a local insert before the floor puts it back: a more urgent priority to its start, a past runAt to its time', () => {
    const floor = engaged(40, t0, { priority: 2, at: headAt }, dbNow);
    // Due now at the floor's priority or a less urgent one: after the floor, nothing moves.
    floor.inserted(2, null);
    floor.inserted(3, null);
    expect(floor.start()).toMatchObject({ priority: 2, headFrom: headAt });
    floor.learn({ priority: 2, at: headAt }, dbNow, false, 1, t0 + 1);
    // A past runAt at the floor's priority: back to it.
    const past = new Date(headAt.getTime() - 60_000);
    floor.inserted(2, past);
    expect(floor.start()).toMatchObject({ priority: 2, headFrom: past });
    floor.learn({ priority: 2, at: headAt }, dbNow, false, 1, t0 + 2);
    // A more urgent priority, due now: the start of that priority (its eligible_at is the
    // database's now, which the node does not know exactly).
    floor.inserted(0, null);
    expect(floor.start()).toMatchObject({ priority: 0, headFrom: new Date(0) });
  });

  it('an insert while a claim is in flight: that claim cannot lift the floor past the row', () => {
    const floor = engaged(40, t0, { priority: 2, at: headAt }, dbNow);
    floor.start();
    floor.inserted(0, null);
    // The claim in flight started before the insert committed: it did not see the row.
    floor.learn({ priority: 2, at: headAt }, dbNow, false, 1, t0 + 1);
    expect(floor.start()).toMatchObject({ priority: 0, headFrom: new Date(0) });
  });

  it('before any claim there is no floor to put back', () => {
    const floor = new ClaimFloor();
    floor.inserted(0, new Date(0));
    expect(floor.start()).toBeUndefined();
  });
});

describe('ClaimFloor: the look behind itself', () => {
  const t0 = 1_000_000;
  const headAt = new Date('2026-12-05T01:00:00.000Z');
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('is due only while engaged, first one budget after the full scan that engaged the floor', () => {
    expect(new ClaimFloor().probeDelay(t0)).toBeUndefined();
    expect(new ClaimFloor().probeFrom()).toBeUndefined();
    const floor = engaged(20, t0, { priority: 3, at: headAt }, dbNow);
    expect(floor.probeDelay(t0)).toBe(20 * PROBE_BUDGET);
    expect(floor.probeDelay(t0 + 20 * PROBE_BUDGET + 5)).toBe(0);
    expect(floor.probeFrom()).toEqual({
      priority: 3,
      at: new Date(headAt.getTime() - CLAIM_FLOOR_SLACK_MS),
    });
  });

  it('comes again one budget of its own cost later, at most PROBE_MAX_GAP_MS', () => {
    const floor = engaged(20, t0, { priority: 0, at: headAt }, dbNow);
    floor.learnProbe(undefined, 50, t0 + 10_000);
    expect(floor.probeDelay(t0 + 10_000)).toBe(50 * PROBE_BUDGET);
    floor.learnProbe(undefined, 60_000, t0 + 20_000);
    expect(floor.probeDelay(t0 + 20_000)).toBe(PROBE_MAX_GAP_MS);
  });

  it('a fast look that found nothing disengages the floor; one that found a row does not', () => {
    const floor = engaged(20, t0, { priority: 0, at: headAt }, dbNow);
    const behind = new Date(headAt.getTime() - 60_000);
    floor.learnProbe({ priority: 0, at: behind }, 1, t0 + 1);
    expect(floor.engaged).toBe(true);
    expect(floor.start()).toMatchObject({ headFrom: behind });
    floor.learnProbe(undefined, FLOOR_ENGAGE_MS, t0 + 2);
    expect(floor.engaged).toBe(true);
    floor.learnProbe(undefined, FLOOR_ENGAGE_MS - 1, t0 + 3);
    expect(floor.engaged).toBe(false);
    expect(floor.start()).toBeUndefined();
    expect(floor.probeDelay(t0 + 4)).toBeUndefined();
  });
});

describe('ClaimFloor: a pin the claim sees', () => {
  const t0 = 1_000_000;
  const head = { priority: 0, at: new Date('2026-12-05T01:00:00.000Z') };
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('one full scan that sees PIN_XIDS and took PIN_SCAN_MS engages the floor at once', () => {
    const floor = new ClaimFloor();
    floor.learn(head, dbNow, true, PIN_SCAN_MS, t0, PIN_XIDS);
    expect(floor.engaged).toBe(true);
    expect(floor.start()).toMatchObject({ headFrom: head.at });
    // The first look behind comes one budget of the engaging scan's cost later.
    expect(floor.probeDelay(t0)).toBe(PIN_SCAN_MS * PROBE_BUDGET);
  });

  it('a pin over a head that is cheap to walk, or a costly scan with no pin, leaves claims scanning fully', () => {
    const floor = new ClaimFloor();
    for (let k = 0; k < 10; k++) {
      floor.learn(head, dbNow, true, PIN_SCAN_MS / 2, t0 + k, 100 * PIN_XIDS);
      expect(floor.start()).toBeUndefined();
      floor.learn(head, dbNow, true, FLOOR_ENGAGE_MS / 2, t0 + k, PIN_XIDS - 1);
      expect(floor.start()).toBeUndefined();
    }
  });

  it('stays engaged through fast looks while claims still see the pin, and disengages on the first claim that does not', () => {
    const floor = new ClaimFloor();
    floor.learn(head, dbNow, true, 2, t0, 5 * PIN_XIDS);
    // A fast look behind that found nothing: the pin is young, not gone.
    floor.learnProbe(undefined, 1, t0 + 1);
    expect(floor.engaged).toBe(true);
    floor.start();
    floor.learn(head, dbNow, false, 0.1, t0 + 2, 6 * PIN_XIDS);
    expect(floor.engaged).toBe(true);
    // The pinning transaction ended: the next claim's snapshot spans a handful of ids.
    floor.start();
    floor.learn(head, dbNow, false, 0.1, t0 + 3, 3);
    expect(floor.engaged).toBe(false);
    expect(floor.start()).toBeUndefined();
  });

  it('a floor engaged by slow scans as well stays engaged when the pin ends, until a fast look', () => {
    const floor = new ClaimFloor();
    for (let k = 0; k < ENGAGE_SCANS; k++) {
      floor.start();
      floor.learn(head, dbNow, true, FLOOR_ENGAGE_MS, t0 + k, 10 * PIN_XIDS);
    }
    floor.learn(head, dbNow, false, 0.1, t0 + 10, 0);
    expect(floor.engaged).toBe(true);
    floor.learnProbe(undefined, FLOOR_ENGAGE_MS - 1, t0 + 11);
    expect(floor.engaged).toBe(false);
  });
});

describe('ClaimFloor: the horizon’s holders', () => {
  const t0 = 1_000_000;
  const head = { priority: 0, at: new Date('2026-12-05T01:00:00.000Z') };
  const dbNow = new Date('2026-12-05T01:00:05.000Z');

  it('a full scan looks when it ran PIN_SCAN_MS, at most once per HORIZON_CHECK_GAP_MS', () => {
    const floor = new ClaimFloor();
    expect(floor.horizonCheckMs(t0)).toBe(PIN_SCAN_MS);
    // A cheap scan did not look (no answer): the next one is asked again.
    floor.learn(head, dbNow, true, 0.1, t0, 0, undefined);
    expect(floor.horizonCheckMs(t0 + 1)).toBe(PIN_SCAN_MS);
    // One that looked and found a young horizon: not again for HORIZON_CHECK_GAP_MS.
    floor.learn(head, dbNow, true, 0.8, t0 + 1, 0, 3);
    expect(floor.engaged).toBe(false);
    expect(floor.horizonCheckMs(t0 + HORIZON_CHECK_GAP_MS)).toBeUndefined();
    expect(floor.horizonCheckMs(t0 + 1 + HORIZON_CHECK_GAP_MS)).toBe(PIN_SCAN_MS);
  });

  it('a holder PIN_XIDS old engages the floor until a look behind finds none, however fast the looks', () => {
    const floor = new ClaimFloor();
    floor.learn(head, dbNow, true, 0.8, t0, 2, PIN_XIDS);
    expect(floor.engaged).toBe(true);
    // Engaged, claims start at the floor and do not look.
    expect(floor.horizonCheckMs(t0 + 10 * HORIZON_CHECK_GAP_MS)).toBeUndefined();
    floor.start();
    floor.learn(head, dbNow, false, 0.1, t0 + 1, 2);
    expect(floor.engaged).toBe(true);
    // A fast look that found nothing, with the holder still there: the pin is young, not gone.
    floor.learnProbe(undefined, 1, t0 + 2, 3 * PIN_XIDS);
    expect(floor.engaged).toBe(true);
    // The holder is gone: the next claim scans fully, and looks again a gap later.
    floor.learnProbe(undefined, 1, t0 + 3, 4);
    expect(floor.engaged).toBe(false);
    expect(floor.start()).toBeUndefined();
    expect(floor.horizonCheckMs(t0 + HORIZON_CHECK_GAP_MS)).toBe(PIN_SCAN_MS);
  });

  it('a look that finds a holder keeps a floor engaged by slow scans through fast looks', () => {
    const floor = engaged(20, t0, head, dbNow);
    floor.learnProbe(undefined, 1, t0 + 1, 2 * PIN_XIDS);
    expect(floor.engaged).toBe(true);
    floor.learnProbe(undefined, 1, t0 + 2, 0);
    expect(floor.engaged).toBe(false);
  });

  it('a holder younger than PIN_XIDS engages nothing', () => {
    const floor = new ClaimFloor();
    floor.learn(head, dbNow, true, 5, t0, 0, PIN_XIDS - 1);
    expect(floor.engaged).toBe(false);
  });
});
