import type { ResolvedOptions } from '../../lib/options/resolved-options';
import { type ClaimFloor, ENGAGE_SCANS, PROBE_BUDGET } from '../../lib/runtime/claim-floor';
import { type ClaimHost, ClaimLoop } from '../../lib/runtime/claim-loop';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import type { Picker } from '../../lib/runtime/picker';
import type { BehindFloor, ClaimHead, ClaimStart } from '../../lib/sql/claim.sql';
import { Telemetry } from '../../lib/telemetry/telemetry';

// The claim loop and its floor's look behind itself (docs/design.md §5.3.1), on fake timers
// and a picker that answers what the test says: the look runs beside a claim in flight (a look
// that walks seconds of dead entries must not stop the queue's claims), and what it finds puts
// the floor back for the next claim.

const FULL_SCAN_MS = 50;

class ScriptedPicker {
  /** The start of each claim, in order (undefined = a full scan). */
  readonly starts: (ClaimStart | undefined)[] = [];
  /** The bounds the looks behind the floor were given. */
  readonly looks: ClaimHead[] = [];
  /** The next claim stays in flight until the test resolves it. */
  holdNext = false;
  release: (() => void) | undefined;
  behind: ClaimHead | undefined;
  head: ClaimHead = { priority: 0, at: new Date('2026-12-06T01:00:00.000Z') };

  async pickBatch(
    _queue: string,
    _batch: number,
    _worker: string,
    floor?: ClaimFloor,
  ): Promise<{ rows: ClaimedRow[]; paused: boolean }> {
    const from = floor?.start();
    this.starts.push(from);
    if (this.holdNext) {
      this.holdNext = false;
      await new Promise<void>((resolve) => (this.release = resolve));
    }
    floor?.learn(this.head, this.head.at, from === undefined, FULL_SCAN_MS, Date.now());
    return { rows: [], paused: false };
  }

  probeBehindFloor(_queue: string, before: ClaimHead): Promise<BehindFloor> {
    this.looks.push(before);
    return Promise.resolve({ head: this.behind, execMs: 2_000, horizonXids: 0 });
  }
}

function host(): ClaimHost {
  return {
    queue: 'q',
    workerId: 'w',
    isRunning: () => true,
    demand: () => 10,
    capacity: () => 10,
    pokeReserve: () => 0,
    minDemand: () => 1,
    idle: () => true,
    holding: () => false,
    paused: false,
    learnPause: () => Promise.resolve(),
    touched: () => undefined,
    accept: () => Promise.resolve(true),
    ticked: () => Promise.resolve(),
    refillDue: () => true,
  };
}

async function settle(): Promise<void> {
  for (let k = 0; k < 10; k++) await Promise.resolve();
}

describe('ClaimLoop: the look behind the claim floor', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('runs beside a claim in flight, and what it finds is where the next claim starts', async () => {
    const picker = new ScriptedPicker();
    const options = { pollInterval: 1_000_000, maxPollInterval: 1_000_000 } as ResolvedOptions;
    const loop = new ClaimLoop(host(), picker as unknown as Picker, options, new Telemetry('test'));
    // ENGAGE_SCANS slow full scans engage the floor.
    for (let k = 0; k < ENGAGE_SCANS; k++) {
      loop.poke();
      await settle();
      jest.advanceTimersByTime(20);
    }
    expect(picker.starts.slice(0, ENGAGE_SCANS)).toEqual(Array(ENGAGE_SCANS).fill(undefined));
    expect(loop.floor.engaged).toBe(true);

    // A claim from the floor stays in flight…
    picker.holdNext = true;
    loop.poke();
    await settle();
    expect(picker.starts.at(-1)).toMatchObject({ headFrom: picker.head.at });
    expect(loop.inFlight).toBe(true);
    // …while the look behind comes due (one budget after the last full scan) and runs anyway.
    const behind = new Date(picker.head.at.getTime() - 3_600_000);
    picker.behind = { priority: 0, at: behind };
    jest.advanceTimersByTime(FULL_SCAN_MS * PROBE_BUDGET + 10);
    await settle();
    expect(picker.looks).toHaveLength(1);
    expect(picker.looks[0]!.at.getTime()).toBeLessThan(picker.head.at.getTime());
    expect(loop.inFlight).toBe(true);

    // The claim in flight comes back (from the old floor); the pick it owes starts behind.
    picker.behind = undefined;
    picker.release!();
    await settle();
    jest.advanceTimersByTime(20);
    await settle();
    expect(picker.starts.at(-1)).toMatchObject({ headFrom: behind });

    // The next look is one budget of its own cost (2 s) later, not sooner.
    jest.advanceTimersByTime(2_000 * PROBE_BUDGET - 100);
    await settle();
    expect(picker.looks).toHaveLength(1);
    jest.advanceTimersByTime(200);
    await settle();
    expect(picker.looks).toHaveLength(2);
    await loop.stop();
  });
});
