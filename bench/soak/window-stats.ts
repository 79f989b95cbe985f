/**
 * Pure statistics of the soak's 5-second windows (docs/performance.md, "Soak"): latency
 * percentiles, the claim statement's per-window mean from two pg_stat_statements readings,
 * and the first and last window of each phase.
 */
import { percentile } from '../src/stats';
import type { PhaseName } from './phase-schedule';

export { percentile };

/**
 * A window's insert→start latencies as `[ms, count]` pairs in ascending ms (the soak's clock is
 * `Date.now()`, so there are few distinct values): windows of a phase pool into the phase's
 * own percentiles ({@link pooledPercentile}) without keeping every sample.
 */
export type LatencyCounts = readonly (readonly [number, number])[];

export function latencyCounts(values: readonly number[]): LatencyCounts {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => a[0] - b[0]);
}

/**
 * The `p`-th percentile (0–100) by nearest rank of every sample of `parts` together: what
 * {@link percentile} answers over the concatenated samples. NaN when there are none.
 */
export function pooledPercentile(parts: readonly LatencyCounts[], p: number): number {
  const counts = new Map<number, number>();
  let total = 0;
  for (const part of parts) {
    for (const [ms, n] of part) {
      counts.set(ms, (counts.get(ms) ?? 0) + n);
      total += n;
    }
  }
  if (total === 0) return NaN;
  const rank = Math.min(total, Math.max(1, Math.ceil((p / 100) * total)));
  let seen = 0;
  for (const [ms, n] of [...counts.entries()].sort((a, b) => a[0] - b[0])) {
    seen += n;
    if (seen >= rank) return ms;
  }
  return NaN;
}

/** Cumulative pg_stat_statements counters of one statement (summed over its entries). */
export interface StatementCounters {
  readonly calls: number;
  readonly totalMs: number;
  readonly rows: number;
  readonly sharedHit: number;
  readonly sharedRead: number;
}

export const NO_CALLS: StatementCounters = {
  calls: 0,
  totalMs: 0,
  rows: 0,
  sharedHit: 0,
  sharedRead: 0,
};

/** The statement between two readings: calls, mean ms, rows and shared buffers per call. */
export interface StatementWindow {
  readonly calls: number;
  readonly meanMs: number;
  readonly rowsPerCall: number;
  readonly buffersPerCall: number;
  readonly readsPerCall: number;
}

export function statementWindow(
  before: StatementCounters,
  after: StatementCounters,
): StatementWindow {
  const calls = after.calls - before.calls;
  const per = (a: number, b: number): number => (calls > 0 ? (a - b) / calls : NaN);
  return {
    calls,
    meanMs: per(after.totalMs, before.totalMs),
    rowsPerCall: per(after.rows, before.rows),
    buffersPerCall: per(after.sharedHit + after.sharedRead, before.sharedHit + before.sharedRead),
    readsPerCall: per(after.sharedRead, before.sharedRead),
  };
}

/** One reported window: what the run did in it and what the server looked like at its end. */
export interface SoakWindow {
  readonly index: number;
  /** Seconds from the run's start to the window's end. */
  readonly endS: number;
  readonly phase: PhaseName;
  readonly offeredStepsPerS: number;
  /** Steps whose run returned in the window (all three steps of the FSM count). */
  readonly doneStepsPerS: number;
  /** doneStepsPerS ÷ offeredStepsPerS, in %. */
  readonly completionPct: number;
  /** Insert call → first step start, ms, over the instances that started in the window. */
  readonly startP50Ms: number;
  readonly startP99Ms: number;
  /** The same latencies, counted per ms: the phase's pooled percentiles read them. */
  readonly startLatencies: LatencyCounts;
  readonly claim: StatementWindow;
  readonly liveTuples: number;
  readonly deadTuples: number;
  readonly autovacuums: number;
  readonly tableBytes: number;
  readonly indexBytes: number;
  /** The oldest XID or xmin among the server's sessions, as an age in transactions. */
  readonly horizonXids: number;
  /** Age of the pin's XID (null when no pin is held). */
  readonly pinXids: number | null;
  /** Who holds the horizon back (the sampler's description of that session). */
  readonly horizonHolder: string | null;
  readonly rssBytes: number;
  /** Instances inserted and not yet finished at the window's end. */
  readonly backlog: number;
}

/** Window statistics from the latency samples and step counts of one window. */
export function windowRates(
  offeredSteps: number,
  doneSteps: number,
  windowS: number,
  startLatencies: readonly number[],
): Pick<
  SoakWindow,
  | 'offeredStepsPerS'
  | 'doneStepsPerS'
  | 'completionPct'
  | 'startP50Ms'
  | 'startP99Ms'
  | 'startLatencies'
> {
  return {
    offeredStepsPerS: offeredSteps / windowS,
    doneStepsPerS: doneSteps / windowS,
    completionPct: offeredSteps > 0 ? (100 * doneSteps) / offeredSteps : NaN,
    startP50Ms: percentile(startLatencies, 50),
    startP99Ms: percentile(startLatencies, 99),
    startLatencies: latencyCounts(startLatencies),
  };
}

/** The first and last window of a phase. */
export interface PhaseEnds {
  readonly phase: PhaseName;
  readonly first: SoakWindow;
  readonly last: SoakWindow;
}

/** The first and last window of every phase that has one, in run order. */
export function phaseEnds(windows: readonly SoakWindow[]): PhaseEnds[] {
  const out: PhaseEnds[] = [];
  for (const w of windows) {
    const current = out[out.length - 1];
    if (current?.phase === w.phase) out[out.length - 1] = { ...current, last: w };
    else out.push({ phase: w.phase, first: w, last: w });
  }
  return out;
}
