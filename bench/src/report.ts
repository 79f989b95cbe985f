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

/** gen-durable median / peer median, for every metric gen-durable and the peer both measured. */
export function ratios(
  rows: Row[],
): Array<{ key: string; better: string; peers: Array<{ engine: string; ratio: number }> }> {
  const out: Array<{
    key: string;
    better: string;
    peers: Array<{ engine: string; ratio: number }>;
  }> = [];
  const add = (
    key: string,
    better: string,
    gd: number,
    others: Array<{ engine: string; v: number }>,
  ): void => {
    const peers = others
      .filter((o) => Number.isFinite(o.v) && o.v !== 0)
      .map((o) => ({ engine: o.engine, ratio: gd / o.v }));
    if (peers.length > 0 && Number.isFinite(gd)) out.push({ key, better, peers });
  };
  const isGd = (e: string): boolean => e === 'gen-durable' || e.startsWith('gen-durable:');
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
    add(
      `${g.scenario}${c}${who} ${g.metric} (${g.unit})`,
      g.better === 'higher' ? 'higher is better' : 'lower is better',
      median(g.values),
      same.map((r) => ({ engine: r.engine, v: median(r.values) })),
    );
    if (g.cpuPer1k && g.cpuPer1k.length > 0) {
      add(
        `${g.scenario}${c}${who} CPU (${cpuUnit(g)})`,
        'lower is better',
        median(g.cpuPer1k),
        same
          .filter((r) => r.cpuPer1k && r.cpuPer1k.length > 0)
          .map((r) => ({ engine: r.engine, v: median(r.cpuPer1k!) })),
      );
    }
  }
  return out;
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
  for (const r of rs) {
    print(
      `${r.key} [${r.better}]: ${r.peers.map((p) => `${p.engine} ${p.ratio.toFixed(2)}×`).join(' · ')}`,
    );
  }
}

export function writeJson(file: string, data: unknown): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}
