import { FULL_SWEEP_EVERY, SweepFloor } from '../../lib/runtime/sweep-floor';

// The floor of a periodic sweep (the reaper, docs/design.md §17.2; the archive's move,
// docs/archive.md): where the next sweep starts, and when it must be full.

describe('SweepFloor', () => {
  const cutoff = new Date('2026-12-06T01:00:00.000Z');
  const slack = 5_000;
  const complete = { cutoff, complete: true };

  it('the first sweep is full; after a complete one the next starts at its cutoff less the slack', () => {
    const floor = new SweepFloor(slack);
    expect(floor.start()).toBeNull();
    floor.learn(null, complete);
    expect(floor.start()).toEqual(new Date(cutoff.getTime() - slack));
  });

  it('a row left in range lowers the floor to it; one above the floor does not raise it', () => {
    const floor = new SweepFloor(slack);
    const left = new Date(cutoff.getTime() - 3_600_000);
    floor.learn(null, { ...complete, left });
    expect(floor.start()).toEqual(left);
    floor.learn(left, { ...complete, left: new Date(cutoff.getTime() - 1_000) });
    expect(floor.start()).toEqual(new Date(cutoff.getTime() - slack));
  });

  it('after an incomplete sweep the next starts where it did (a full one stays full)', () => {
    const floor = new SweepFloor(slack);
    floor.learn(null, { cutoff, complete: false });
    expect(floor.start()).toBeNull();
    floor.learn(null, complete);
    const from = floor.start()!;
    floor.learn(from, { cutoff: new Date(cutoff.getTime() + 30_000), complete: false });
    expect(floor.start()).toEqual(from);
  });

  it(`at least every ${FULL_SWEEP_EVERY}th sweep is full`, () => {
    const floor = new SweepFloor(slack);
    const starts: (Date | null)[] = [];
    for (let sweep = 0; sweep < 3 * FULL_SWEEP_EVERY; sweep++) {
      const from = floor.start();
      starts.push(from);
      floor.learn(from, { cutoff: new Date(cutoff.getTime() + sweep * 30_000), complete: true });
    }
    const fulls = starts.flatMap((s, k) => (s === null ? [k] : []));
    expect(fulls).toEqual([0, FULL_SWEEP_EVERY, 2 * FULL_SWEEP_EVERY]);
  });
});
