import { type SoloMember, SoloRun } from '../../lib/runtime/solo-run';

// lib/runtime/solo-run.ts (docs/design.md §26.5): the node-wide hold of a poison-pill suspect. Members
// are fakes with a settable busy count; time is jest's fake clock.

class FakeMember implements SoloMember {
  busyCount = 0;
  quiesced = 0;
  resumed = 0;
  quiesce(): void {
    this.quiesced++;
  }
  resume(): void {
    this.resumed++;
  }
}

describe('SoloRun', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const setup = () => {
    const solo = new SoloRun(2_000);
    const a = new FakeMember();
    const b = new FakeMember();
    solo.add(a);
    solo.add(b);
    const calls: string[] = [];
    const begin = (member: FakeMember, id: string) =>
      solo.begin(
        member,
        id,
        () => calls.push(`start ${id}`),
        () => calls.push(`abandon ${id}`),
      );
    return { solo, a, b, calls, begin };
  };

  it('quiesces every member, starts the suspect once the whole node is quiet, resumes all at its end', () => {
    const { solo, a, b, calls, begin } = setup();
    a.busyCount = 1;
    b.busyCount = 2;
    expect(begin(a, '7')).toBe(true);
    expect([a.quiesced, b.quiesced]).toEqual([1, 1]);
    expect(solo.active).toBe(true);
    expect(solo.suspectId).toBe('7');
    a.busyCount = 0;
    solo.settled();
    expect(calls).toEqual([]);
    b.busyCount = 0;
    solo.settled();
    solo.settled();
    expect(calls).toEqual(['start 7']);
    solo.end(b); // not the holder: nothing
    expect(solo.active).toBe(true);
    solo.end(a);
    expect(solo.active).toBe(false);
    expect([a.resumed, b.resumed]).toEqual([1, 1]);
  });

  it('starts at once on a quiet node; one suspect at a time', () => {
    const { solo, a, b, calls, begin } = setup();
    expect(begin(a, '7')).toBe(true);
    expect(calls).toEqual(['start 7']);
    expect(begin(b, '8')).toBe(false);
    solo.end(a);
    expect(begin(b, '8')).toBe(true);
    expect(calls).toEqual(['start 7', 'start 8']);
  });

  it('a node that does not go quiet within max(leaseTtl, 10 s) gives the suspect up, resumes, and takes none for as long again', () => {
    const { solo, a, b, calls, begin } = setup();
    expect(solo.waitMs).toBe(10_000);
    b.busyCount = 1;
    expect(begin(a, '7')).toBe(true);
    jest.advanceTimersByTime(9_999);
    expect(calls).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(calls).toEqual(['abandon 7']);
    expect(solo.active).toBe(false);
    expect([a.resumed, b.resumed]).toEqual([1, 1]);
    b.busyCount = 0;
    expect(begin(a, '7')).toBe(false);
    jest.advanceTimersByTime(10_000);
    expect(begin(a, '7')).toBe(true);
    expect(calls).toEqual(['abandon 7', 'start 7']);
  });

  it('a started suspect is never abandoned, however long it runs', () => {
    const { solo, a, calls, begin } = setup();
    expect(begin(a, '7')).toBe(true);
    a.busyCount = 1; // its own step
    jest.advanceTimersByTime(60_000);
    expect(calls).toEqual(['start 7']);
    expect(solo.active).toBe(true);
  });
});
