/**
 * Issue 30's targets, read off a soak's windows (docs/performance.md, "Soak"). Pure. The clean
 * reference of a figure is its median over the clean windows after the first (the first holds
 * the warm-up); "pinned" means the pinned and readers windows (the pin is held through both).
 * The latency targets are read twice: strictly, the worst 5-s window against the clean windows'
 * median; and pooled, the p99 of every sample of the span against that of the other span.
 */
import type { PhaseName } from './phase-schedule';
import { percentile, pooledPercentile, type SoakWindow } from './window-stats';

export interface TargetReading {
  readonly target: string;
  /** The measured value, worded (ratios with their two sides). */
  readonly reading: string;
  /** null when this run cannot tell (no window of the phase it needs). */
  readonly met: boolean | null;
}

const median = (xs: readonly number[]): number =>
  percentile(
    xs.filter((x) => Number.isFinite(x)),
    50,
  );
const finite = (xs: readonly number[]): number[] => xs.filter((x) => Number.isFinite(x));

function of(windows: readonly SoakWindow[], ...phases: PhaseName[]): SoakWindow[] {
  return windows.filter((w) => phases.includes(w.phase));
}

/** 10 minutes of windows, or half the phase when it is shorter (the flatness target). */
function flatSpan(count: number, windowS: number): number {
  return Math.max(1, Math.min(Math.round(600 / windowS), Math.floor(count / 2)));
}

const fmt = (x: number, digits = 1): string => (Number.isFinite(x) ? x.toFixed(digits) : '—');

export function readTargets(
  windows: readonly SoakWindow[],
  windowS: number,
  lost: number,
  duplicated: number,
): TargetReading[] {
  const clean = of(windows, 'clean').slice(1);
  const pinned = of(windows, 'pinned', 'readers');
  const recovery = of(windows, 'recovery');
  const out: TargetReading[] = [];
  const ratio = (
    target: string,
    pick: (w: SoakWindow) => number,
    limit: number,
    unit: string,
    reference: number = median(clean.map(pick)),
  ): void => {
    const worst = Math.max(...finite(pinned.map(pick)));
    const r = worst / reference;
    out.push({
      target,
      reading: `${fmt(worst)} ${unit} worst pinned ÷ ${fmt(reference)} ${unit} clean = ${fmt(r, 2)}×`,
      met: pinned.length && clean.length && Number.isFinite(r) ? r <= limit : null,
    });
  };

  const minPinned = Math.min(...finite(pinned.map((w) => w.completionPct)));
  out.push({
    target: 'completion ≥ 98 % of offered in every pinned window',
    reading: `lowest ${fmt(minPinned)} %`,
    met: pinned.length ? minPinned >= 98 : null,
  });
  ratio('insert→start p99 ≤ 2× clean, worst window', (w) => w.startP99Ms, 2, 'ms');
  const pooled = (ws: readonly SoakWindow[]): number =>
    pooledPercentile(
      ws.map((w) => w.startLatencies),
      99,
    );
  const pinnedP99 = pooled(pinned);
  const cleanP99 = pooled(clean);
  out.push({
    target: 'insert→start p99 ≤ 2× clean, phase pooled',
    reading: `${fmt(pinnedP99)} ms pinned ÷ ${fmt(cleanP99)} ms clean = ${fmt(pinnedP99 / cleanP99, 2)}×`,
    met:
      pinned.length && clean.length && Number.isFinite(pinnedP99 / cleanP99)
        ? pinnedP99 / cleanP99 <= 2
        : null,
  });
  ratio('claim mean ≤ 2× clean', (w) => w.claim.meanMs, 2, 'ms');
  const lastClean = clean[clean.length - 1];
  ratio(
    'hot table + indexes ≤ 3× clean',
    (w) => (w.tableBytes + w.indexBytes) / 2 ** 20,
    3,
    'MiB',
    lastClean ? (lastClean.tableBytes + lastClean.indexBytes) / 2 ** 20 : NaN,
  );

  const deadRef = median(clean.map((w) => w.deadTuples));
  const release = recovery[0] ? recovery[0].endS - windowS : NaN;
  const back = recovery.find((w) => w.deadTuples <= deadRef * 1.1);
  out.push({
    target: 'dead tuples within 10 % of clean ≤ 5 min after release',
    reading: back
      ? `${back.deadTuples} ≤ 1.1 × ${fmt(deadRef, 0)} after ${back.endS - release} s`
      : `not back in the ${recovery.length * windowS} s of recovery (clean ${fmt(deadRef, 0)}, last ${recovery[recovery.length - 1]?.deadTuples ?? '—'})`,
    met: recovery.length ? back !== undefined && back.endS - release <= 300 : null,
  });
  out.push({
    target: '0 lost or duplicated commits',
    reading: `${lost} lost, ${duplicated} duplicated`,
    met: lost === 0 && duplicated === 0,
  });

  const span = flatSpan(clean.length, windowS);
  const head = median(clean.slice(0, span).map((w) => w.startP99Ms));
  const tail = median(clean.slice(-span).map((w) => w.startP99Ms));
  out.push({
    target: 'clean flat: last 10 min p99 ≤ 1.2× first 10 min',
    reading: `${fmt(tail)} ÷ ${fmt(head)} ms = ${fmt(tail / head, 2)}× (${span} windows each)`,
    met: clean.length >= 2 ? tail / head <= 1.2 : null,
  });
  const headPooled = pooled(clean.slice(0, span));
  const tailPooled = pooled(clean.slice(-span));
  out.push({
    target: 'clean flat, pooled: last 10 min p99 ≤ 1.2× first 10 min',
    reading: `${fmt(tailPooled)} ÷ ${fmt(headPooled)} ms = ${fmt(tailPooled / headPooled, 2)}× (${span} windows each)`,
    met: clean.length >= 2 ? tailPooled / headPooled <= 1.2 : null,
  });
  return out;
}
