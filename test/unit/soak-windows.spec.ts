import { readClaimPlan } from '../../bench/soak/claim-plan';
import { checkCommits } from '../../bench/soak/commit-check';
import {
  phaseAt,
  phaseOfWindow,
  phaseSchedule,
  windowCount,
} from '../../bench/soak/phase-schedule';
import { phaseStatements } from '../../bench/soak/phase-statements';
import { parseSoakOptions } from '../../bench/soak/soak-options';
import { readTargets } from '../../bench/soak/soak-targets';
import {
  latencyCounts,
  NO_CALLS,
  percentile,
  phaseEnds,
  pooledPercentile,
  type SoakWindow,
  statementWindow,
  windowRates,
} from '../../bench/soak/window-stats';
import type { PhaseName } from '../../bench/soak/phase-schedule';

// The pure parts of `npm run soak` (docs/performance.md, "Soak"): its phase schedule, its window
// statistics, its flags, the claim plan's figures and the reading of issue 30's targets.

describe('soak phase schedule', () => {
  const schedule = phaseSchedule(20, 30, 5);

  it('runs clean, pinned, readers, recovery back to back', () => {
    expect(schedule.phases).toEqual([
      { name: 'clean', startS: 0, seconds: 20 },
      { name: 'pinned', startS: 20, seconds: 20 },
      { name: 'readers', startS: 40, seconds: 20 },
      { name: 'recovery', startS: 60, seconds: 30 },
    ]);
    expect(schedule.totalS).toBe(90);
    expect(windowCount(schedule)).toBe(18);
  });

  it('places a moment in the phase whose span holds it, the start included', () => {
    expect(phaseAt(schedule, 0)?.name).toBe('clean');
    expect(phaseAt(schedule, 19.999)?.name).toBe('clean');
    expect(phaseAt(schedule, 20)?.name).toBe('pinned');
    expect(phaseAt(schedule, 89.9)?.name).toBe('recovery');
    expect(phaseAt(schedule, 90)).toBeUndefined();
    expect(phaseAt(schedule, -1)).toBeUndefined();
  });

  it('gives each window the phase of its start', () => {
    expect(phaseOfWindow(schedule, 3).name).toBe('clean');
    expect(phaseOfWindow(schedule, 4).name).toBe('pinned');
    expect(phaseOfWindow(schedule, 17).name).toBe('recovery');
    expect(() => phaseOfWindow(schedule, 18)).toThrow('past the end');
  });

  it('gives single phases their own lengths, and leaves the readers out at 0', () => {
    const long = phaseSchedule(20, 30, 5, { clean: 10, pinned: 60, readers: 0 });
    expect(long.phases).toEqual([
      { name: 'clean', startS: 0, seconds: 10 },
      { name: 'pinned', startS: 10, seconds: 60 },
      { name: 'recovery', startS: 70, seconds: 30 },
    ]);
    expect(phaseOfWindow(long, 13).name).toBe('pinned');
    expect(phaseOfWindow(long, 14).name).toBe('recovery');
    expect(() => phaseSchedule(20, 30, 5, { pinned: 0 })).toThrow(
      'pinned seconds must be a positive',
    );
    expect(() => phaseSchedule(20, 30, 5, { readers: 7 })).toThrow('multiples of the window');
  });

  it('refuses phases that are not whole windows', () => {
    expect(() => phaseSchedule(12, 12, 5)).toThrow('multiples of the window');
    expect(() => phaseSchedule(0, 10, 5)).toThrow('positive integer');
  });
});

describe('soak window statistics', () => {
  it('takes percentiles by nearest rank, NaN for no sample', () => {
    const xs = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
    expect(percentile(xs, 50)).toBe(5);
    expect(percentile(xs, 99)).toBe(10);
    expect(percentile(xs, 0)).toBe(1);
    expect(percentile([], 50)).toBeNaN();
  });

  it("reads the claim's window from two pg_stat_statements readings", () => {
    const before = { calls: 100, totalMs: 50, rows: 900, sharedHit: 1000, sharedRead: 0 };
    const after = { calls: 300, totalMs: 250, rows: 2900, sharedHit: 5000, sharedRead: 400 };
    expect(statementWindow(before, after)).toEqual({
      calls: 200,
      meanMs: 1,
      rowsPerCall: 10,
      buffersPerCall: 22,
      readsPerCall: 2,
    });
    expect(statementWindow(NO_CALLS, NO_CALLS).meanMs).toBeNaN();
  });

  it('rates a window: offered and done per second, completion, start latencies', () => {
    expect(windowRates(5000, 4900, 5, [10, 20, 30])).toEqual({
      offeredStepsPerS: 1000,
      doneStepsPerS: 980,
      completionPct: 98,
      startP50Ms: 20,
      startP99Ms: 30,
      startLatencies: [
        [10, 1],
        [20, 1],
        [30, 1],
      ],
    });
  });

  it('counts latencies per ms, and pools windows into the percentile of all their samples', () => {
    const a = [3, 1, 3, 2, 40];
    const b = [5, 5, 1, 7];
    const c: number[] = [];
    expect(latencyCounts(a)).toEqual([
      [1, 1],
      [2, 1],
      [3, 2],
      [40, 1],
    ]);
    for (const p of [0, 1, 50, 77, 89, 90, 99, 100]) {
      expect(pooledPercentile([a, b, c].map(latencyCounts), p)).toBe(
        percentile([...a, ...b, ...c], p),
      );
    }
    expect(pooledPercentile([latencyCounts([])], 99)).toBeNaN();
    expect(pooledPercentile([], 50)).toBeNaN();
  });
});

/** A window with the given figures (the rest ordinary). */
function win(index: number, phase: PhaseName, over: Partial<SoakWindow> = {}): SoakWindow {
  return {
    index,
    endS: (index + 1) * 5,
    phase,
    offeredStepsPerS: 1000,
    doneStepsPerS: 1000,
    completionPct: 100,
    startP50Ms: 10,
    startP99Ms: 30,
    startLatencies: [
      [10, 98],
      [30, 2],
    ],
    claim: { calls: 100, meanMs: 1, rowsPerCall: 5, buffersPerCall: 100, readsPerCall: 0 },
    liveTuples: 1000,
    deadTuples: 1000,
    autovacuums: 0,
    tableBytes: 2 ** 20,
    indexBytes: 2 ** 20,
    horizonXids: 10,
    pinXids: null,
    horizonHolder: null,
    rssBytes: 2 ** 27,
    backlog: 5,
    ...over,
  };
}

describe('soak phase ends and targets', () => {
  const windows = [
    win(0, 'clean', { startP99Ms: 500 }),
    win(1, 'clean'),
    win(2, 'clean'),
    win(3, 'pinned', {
      startP99Ms: 50,
      startLatencies: [
        [10, 97],
        [50, 3],
      ],
      claim: { ...win(0, 'clean').claim, meanMs: 3 },
    }),
    win(4, 'readers', { completionPct: 97, tableBytes: 5 * 2 ** 20, deadTuples: 9000 }),
    win(5, 'recovery', { deadTuples: 5000 }),
    win(6, 'recovery', { deadTuples: 1050 }),
  ];

  it('gives the first and last window of each phase in run order', () => {
    expect(phaseEnds(windows).map((e) => [e.phase, e.first.index, e.last.index])).toEqual([
      ['clean', 0, 2],
      ['pinned', 3, 3],
      ['readers', 4, 4],
      ['recovery', 5, 6],
    ]);
  });

  it('reads each target against the clean windows after the first', () => {
    const byTarget = new Map(readTargets(windows, 5, 0, 0).map((t) => [t.target, t]));
    expect(byTarget.get('completion ≥ 98 % of offered in every pinned window')?.met).toBe(false);
    // p99 50 ms pinned vs 30 ms clean (the 500 ms warm-up window is left out): 1.67×
    expect(byTarget.get('insert→start p99 ≤ 2× clean, worst window')).toMatchObject({
      met: true,
      reading: expect.stringContaining('1.67×'),
    });
    // Pooled: the pinned and readers windows' 200 samples hold 3 of 50 ms and 2 of 30 ms, so
    // their p99 (the 198th) is 50 ms; the clean windows' 200 samples (the first left out) 30 ms.
    expect(byTarget.get('insert→start p99 ≤ 2× clean, phase pooled')).toMatchObject({
      met: true,
      reading: '50.0 ms pinned ÷ 30.0 ms clean = 1.67×',
    });
    expect(byTarget.get('claim mean ≤ 2× clean')?.met).toBe(false);
    expect(byTarget.get('clean flat, pooled: last 10 min p99 ≤ 1.2× first 10 min')).toMatchObject({
      met: true,
      reading: '30.0 ÷ 30.0 ms = 1.00× (1 windows each)',
    });
    const slower = windows.map((w) =>
      w.index === 2
        ? {
            ...w,
            startLatencies: [
              [10, 90],
              [40, 10],
            ] as const,
          }
        : w,
    );
    expect(
      readTargets(slower, 5, 0, 0).find((t) => t.target.startsWith('clean flat, pooled')),
    ).toMatchObject({ met: false, reading: '40.0 ÷ 30.0 ms = 1.33× (1 windows each)' });
    // 6 MiB pinned vs 2 MiB at the last clean window
    expect(byTarget.get('hot table + indexes ≤ 3× clean')?.reading).toContain('3.00×');
    expect(byTarget.get('dead tuples within 10 % of clean ≤ 5 min after release')).toMatchObject({
      met: true,
      reading: expect.stringContaining('after 10 s'),
    });
    expect(byTarget.get('0 lost or duplicated commits')?.met).toBe(true);
    expect(readTargets(windows, 5, 1, 0).find((t) => t.target.startsWith('0 lost'))?.met).toBe(
      false,
    );
  });

  it('cannot tell a target whose phase has no window', () => {
    const cleanOnly = readTargets(windows.slice(0, 3), 5, 0, 0);
    expect(cleanOnly.find((t) => t.target.startsWith('insert→start'))?.met).toBeNull();
    expect(cleanOnly.find((t) => t.target.startsWith('dead tuples'))?.met).toBeNull();
  });
});

describe('soak server time by statement', () => {
  it('ranks the statements of a phase by the time they took between two readings', () => {
    const before = [
      { queryId: '1', text: 'claim', calls: 100, totalMs: 50 },
      { queryId: '2', text: 'snapshot', calls: 1, totalMs: 900 },
      { queryId: '3', text: 'idle', calls: 5, totalMs: 5 },
    ];
    const after = [
      { queryId: '1', text: 'claim', calls: 300, totalMs: 150 },
      { queryId: '2', text: 'snapshot', calls: 3, totalMs: 5_900 },
      { queryId: '3', text: 'idle', calls: 5, totalMs: 5 },
      { queryId: '4', text: 'new', calls: 2, totalMs: 30 },
    ];
    expect(phaseStatements('pinned', 60, before, after, 2)).toEqual({
      phase: 'pinned',
      seconds: 60,
      totalMs: 5_130,
      top: [
        { text: 'snapshot', calls: 2, totalMs: 5_000, meanMs: 2_500 },
        { text: 'claim', calls: 200, totalMs: 100, meanMs: 0.5 },
      ],
    });
  });
});

describe('soak flags', () => {
  it('defaults to the issue 30 run, --short to the CI variant', () => {
    expect(parseSoakOptions([])).toMatchObject({
      rate: 1000,
      concurrency: 10,
      phaseSeconds: 120,
      recoverySeconds: 120,
      windowSeconds: 5,
      pg: 15,
      short: false,
    });
    expect(parseSoakOptions(['--short'])).toMatchObject({
      rate: 300,
      phaseSeconds: 20,
      recoverySeconds: 20,
      short: true,
    });
  });

  it('takes values after the flag or after =, and refuses unknown flags and bad values', () => {
    expect(
      parseSoakOptions(['--rate', '500', '--phase-seconds=60', '--pg', '17', '--out', 'x.json']),
    ).toMatchObject({ rate: 500, phaseSeconds: 60, recoverySeconds: 60, pg: 17, out: 'x.json' });
    expect(() => parseSoakOptions(['--rates', '5'])).toThrow('unknown flag --rates');
    expect(() => parseSoakOptions(['--rate', 'fast'])).toThrow('positive number');
    expect(() => parseSoakOptions(['--pg', '16'])).toThrow('15, 17 or 18');
    expect(parseSoakOptions(['--pg', '18'])).toMatchObject({ pg: 18 });
  });

  it('--pin chooses what holds the horizon in the pinned phase: xid (default) or reader', () => {
    expect(parseSoakOptions([])).toMatchObject({ pin: 'xid' });
    expect(parseSoakOptions(['--pin', 'reader'])).toMatchObject({ pin: 'reader' });
    expect(() => parseSoakOptions(['--pin', 'slot'])).toThrow('--pin is xid or reader, got slot');
  });

  it('--clean-seconds, --pinned-seconds and --readers-seconds set single phases', () => {
    expect(parseSoakOptions([])).toMatchObject({ phaseLengths: {} });
    expect(
      parseSoakOptions([
        '--clean-seconds',
        '600',
        '--pinned-seconds=3600',
        '--readers-seconds',
        '0',
      ]),
    ).toMatchObject({ phaseSeconds: 120, phaseLengths: { clean: 600, pinned: 3600, readers: 0 } });
    expect(() => parseSoakOptions(['--pinned-seconds', '0'])).toThrow('positive number');
    expect(() => parseSoakOptions(['--readers-seconds', '-5'])).toThrow('0 or more');
  });

  it('--engine: gen-durable by default, pgq on PostgreSQL 15 only', () => {
    expect(parseSoakOptions([])).toMatchObject({ engine: 'gen-durable' });
    expect(parseSoakOptions(['--engine', 'pgq'])).toMatchObject({ engine: 'pgq', pg: 15 });
    expect(() => parseSoakOptions(['--engine', 'pgq', '--pg', '18'])).toThrow(
      '--engine pgq runs on PostgreSQL 15 only',
    );
    expect(() => parseSoakOptions(['--engine', 'river'])).toThrow('gen-durable or pgq');
  });
});

describe('soak claim plan', () => {
  it('reads execution time, the top buffers and the candidates’ pick index scan buffers (not the head probe’s)', () => {
    const plan = readClaimPlan('pin end', [
      'Sort (actual time=3.1..3.2 rows=10 loops=1)',
      '  Buffers: shared hit=900 read=12',
      '  CTE head',
      '    ->  Limit (actual time=0.1..0.1 rows=1 loops=1)',
      '          ->  Index Scan using gen_durable_pick on gen_durable h (actual time=0.1..0.1 rows=1 loops=1)',
      '                Buffers: shared hit=5',
      '  CTE cand',
      '    ->  Limit (actual time=0.1..2.0 rows=10 loops=1)',
      '          ->  LockRows (actual time=0.1..2.0 rows=10 loops=1)',
      '                ->  Index Scan using gen_durable_pick on gen_durable g (actual time=0.1..1.9 rows=10 loops=1)',
      '                      Buffers: shared hit=700',
      '  CTE claimed',
      '    ->  Update on gen_durable g_1 (actual time=3.0..3.0 rows=8 loops=1)',
      'Planning Time: 0.5 ms',
      'Execution Time: 3.4 ms',
    ]);
    expect(plan).toMatchObject({
      label: 'pin end',
      executionMs: 3.4,
      buffers: 912,
      pickBuffers: 700,
      rowsClaimed: 8,
    });
  });
});

describe('soak commit check', () => {
  const clean = { inserted: 100, rows: 100, done: 100, exact: 100, long: 0, live: 0 };

  it('finds nothing wrong when every instance is done with the trail a, b, c', () => {
    expect(checkCommits(clean)).toEqual({ lost: 0, duplicated: 0, unfinished: 0 });
  });

  it('counts a missing row, a failed row or a short trail as lost, a live row as unfinished', () => {
    expect(checkCommits({ ...clean, rows: 99, done: 99, exact: 99 }).lost).toBe(1);
    expect(checkCommits({ ...clean, done: 98, exact: 98 }).lost).toBe(2);
    expect(checkCommits({ ...clean, done: 97, exact: 97, live: 3 })).toEqual({
      lost: 0,
      duplicated: 0,
      unfinished: 3,
    });
  });

  it('counts a repeated step or an extra row as duplicated, not lost', () => {
    expect(checkCommits({ ...clean, exact: 99, long: 1 })).toEqual({
      lost: 0,
      duplicated: 1,
      unfinished: 0,
    });
    expect(checkCommits({ ...clean, rows: 101, done: 101 }).duplicated).toBe(1);
  });
});
