// The printed table, the gen-durable ratios, and the JSON file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Row } from './scenarios';
import { median, summary } from './stats';

export interface Skipped {
  scenario: string;
  engine: string;
  reason: string;
}

function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '—';
  if (unit.endsWith('/s')) return Math.round(v).toLocaleString('en-US');
  if (unit === '×') return v.toFixed(2);
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function pad(s: string, w: number, right = false): string {
  return right ? s.padStart(w) : s.padEnd(w);
}

export function cpuUnit(r: Row): string {
  return r.scenario === 'fsm3' ? 'ms/1k steps' : 'ms/1k jobs';
}

export function printTable(rows: Row[], print: (l: string) => void): void {
  const head = [
    'scenario',
    'engine',
    'c',
    'n',
    'metric',
    'unit',
    'min',
    'median',
    'max',
    'CPU/1k med',
    'CPU split (worker+pg+redis)',
  ];
  const body = rows.map((r) => {
    const s = summary(r.values);
    const cpu =
      r.cpuPer1k && r.cpuPer1k.length > 0 ? `${fmt(median(r.cpuPer1k), 'ms')} ${cpuUnit(r)}` : '';
    let split = '';
    if (r.cpu && r.cpu.length > 0) {
      const units = r.n ? (r.scenario === 'fsm3' ? 3 * r.n : r.n) / 1000 : 1;
      const w = median(r.cpu.map((c) => c.workerMs)) / units;
      const pgVals = r.cpu.map((c) => c.pgMs).filter((x): x is number => x !== undefined);
      const rdVals = r.cpu.map((c) => c.redisMs).filter((x): x is number => x !== undefined);
      split = `${fmt(w, 'ms')}+${pgVals.length ? fmt(median(pgVals) / units, 'ms') : 'n/a'}${rdVals.length ? '+' + fmt(median(rdVals) / units, 'ms') : ''}`;
    }
    const err =
      r.errors && r.errors.length > 0
        ? ` (${r.errors.length} failed: ${r.errors[0]!.slice(0, 80)})`
        : '';
    return [
      r.scenario,
      r.engine,
      r.concurrency !== undefined ? String(r.concurrency) : '',
      r.n !== undefined ? String(r.n) : '',
      r.metric,
      r.unit,
      r.values.length ? fmt(s.min, r.unit) : 'failed',
      r.values.length ? fmt(s.median, r.unit) : '',
      r.values.length ? fmt(s.max, r.unit) : '',
      cpu,
      split + err,
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const numeric = new Set([2, 3, 6, 7, 8]);
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => pad(c, widths[i]!, numeric.has(i)))
      .join('  ')
      .trimEnd();
  print(line(head));
  print(widths.map((w) => '-'.repeat(w)).join('  '));
  let last = '';
  for (const b of body) {
    if (last && b[0] !== last) print('');
    last = b[0]!;
    print(line(b));
  }
}

/** A ratio of gen-durable to one peer: of the medians, and paired within repeats. */
export interface PeerRatio {
  engine: string;
  /** gen-durable median ÷ peer median. */
  ratio: number;
  /** Median over repeats of gen-durable ÷ peer measured in the same repeat (with min, max, n). */
  paired?: { median: number; min: number; max: number; n: number };
}

export interface RatioLine {
  key: string;
  better: string;
  peers: PeerRatio[];
}

const isGd = (e: string): boolean => e === 'gen-durable' || e.startsWith('gen-durable:');

/** Same-repeat ratios of `g` to `p` over the repeats both measured. */
function paired(
  g: Row,
  p: Row,
  pick: (r: Row) => number[] | undefined,
): PeerRatio['paired'] | undefined {
  const gv = pick(g);
  const pv = pick(p);
  if (!gv || !pv || !g.reps || !p.reps) return undefined;
  const byRep = new Map<number, number>();
  p.reps.forEach((rep, i) => {
    const v = pv[i];
    if (v !== undefined && Number.isFinite(v) && v !== 0) byRep.set(rep, v);
  });
  const rs: number[] = [];
  g.reps.forEach((rep, i) => {
    const v = gv[i];
    const o = byRep.get(rep);
    if (v !== undefined && o !== undefined && Number.isFinite(v)) rs.push(v / o);
  });
  if (rs.length === 0) return undefined;
  const s = summary(rs);
  return { median: s.median, min: s.min, max: s.max, n: rs.length };
}

/**
 * gen-durable ÷ peer for every metric gen-durable and the peer both measured: median ÷ median,
 * and paired (the median of same-repeat ratios, which a load drift across the run cancels out
 * of; repeats run the engines in alternating order).
 */
export function ratios(rows: Row[]): RatioLine[] {
  const out: RatioLine[] = [];
  for (const g of rows.filter((r) => isGd(r.engine) && r.values.length > 0)) {
    const same = rows.filter(
      (r) =>
        !isGd(r.engine) &&
        r.scenario === g.scenario &&
        r.concurrency === g.concurrency &&
        r.metric === g.metric &&
        r.values.length > 0,
    );
    const c = g.concurrency !== undefined ? ` c=${g.concurrency}` : '';
    const who = g.engine === 'gen-durable' ? '' : ` [${g.engine}]`;
    const add = (key: string, better: string, pick: (r: Row) => number[] | undefined): void => {
      const gv = pick(g);
      if (!gv || gv.length === 0) return;
      const gm = median(gv);
      const peers: PeerRatio[] = [];
      for (const r of same) {
        const v = pick(r);
        if (!v || v.length === 0) continue;
        const m = median(v);
        if (!Number.isFinite(m) || m === 0 || !Number.isFinite(gm)) continue;
        const pr = paired(g, r, pick);
        peers.push({ engine: r.engine, ratio: gm / m, ...(pr ? { paired: pr } : {}) });
      }
      if (peers.length > 0) out.push({ key, better, peers });
    };
    add(
      `${g.scenario}${c}${who} ${g.metric} (${g.unit})`,
      g.better === 'higher' ? 'higher is better' : 'lower is better',
      (r) => r.values,
    );
    add(`${g.scenario}${c}${who} CPU (${cpuUnit(g)})`, 'lower is better', (r) => r.cpuPer1k);
  }
  return out;
}

/** Paired-ratio medians by `key → engine`, for --until-stable. */
export function pairedRatioMap(rows: Row[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of ratios(rows)) {
    for (const p of line.peers) m.set(`${line.key} / ${p.engine}`, p.paired?.median ?? p.ratio);
  }
  return m;
}

/** The largest relative move of a ratio present in both maps (Infinity when none is). */
export function maxMove(before: Map<string, number>, after: Map<string, number>): number {
  let moved = -Infinity;
  for (const [k, v] of after) {
    const b = before.get(k);
    if (b === undefined || !Number.isFinite(b) || b === 0) continue;
    moved = Math.max(moved, Math.abs(v / b - 1));
  }
  return moved === -Infinity ? Infinity : moved;
}

export function printRatios(
  rows: Row[],
  genDurableMissing: string | undefined,
  print: (l: string) => void,
): void {
  if (genDurableMissing) {
    print(`${genDurableMissing} — no ratios.`);
    return;
  }
  const rs = ratios(rows);
  if (rs.length === 0) {
    print('gen-durable: no figure to compare (not selected, or its cases failed).');
    return;
  }
  print('(median ÷ median; in brackets the paired ratio: median [min–max] of same-repeat ratios)');
  for (const r of rs) {
    const cells = r.peers.map((p) => {
      const pr =
        p.paired && p.paired.n > 1
          ? ` [${p.paired.median.toFixed(2)}: ${p.paired.min.toFixed(2)}–${p.paired.max.toFixed(2)}, n=${p.paired.n}]`
          : '';
      return `${p.engine} ${p.ratio.toFixed(2)}×${pr}`;
    });
    print(`${r.key} [${r.better}]: ${cells.join(' · ')}`);
  }
}

export function writeJson(file: string, data: unknown): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}
