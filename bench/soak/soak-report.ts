/**
 * The soak's output (docs/performance.md, "Soak"): one table line per window on stdout, and at
 * the end a JSON result and a Markdown summary of it under bench/results/ (git-ignored).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

import type { ClaimPlan } from './claim-plan';
import type { PhaseStatements } from './phase-statements';
import type { SoakOptions } from './soak-options';
import type { TargetReading } from './soak-targets';
import { phaseEnds, pooledPercentile, type SoakWindow } from './window-stats';

/** What the run's end found in the table (docs/performance.md, "Soak": lost and duplicated). */
export interface Verification {
  readonly offered: number;
  readonly inserted: number;
  readonly rows: number;
  readonly done: number;
  /** Done with the trail a, b, c exactly. */
  readonly exact: number;
  /** Still live when the drain time ran out (slow, not lost). */
  readonly unfinished: number;
  readonly lost: number;
  readonly duplicated: number;
  /** Step runs beyond an instance's first run of that step. */
  readonly reruns: number;
  readonly insertErrors: number;
}

export interface SoakResult {
  readonly command: string;
  readonly startedAt: string;
  readonly wallSeconds: number;
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string | undefined;
    readonly loadAvgAtStart: number[];
    readonly loadAvgAtEnd: number[];
    readonly node: string;
  };
  readonly git: string | undefined;
  readonly postgres: {
    readonly label: string;
    readonly version: string;
    readonly settings: Record<string, string>;
  };
  readonly options: SoakOptions;
  readonly windows: readonly SoakWindow[];
  readonly plans: readonly ClaimPlan[];
  /** Per phase, the statements that took the most server time. */
  readonly phaseStatements: readonly PhaseStatements[];
  readonly indexSizes: readonly { index: string; bytes: number }[];
  readonly readerReads: { readonly count: number; readonly meanMs: number };
  readonly verification: Verification;
  readonly targets: readonly TargetReading[];
}

const MiB = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
const num = (x: number, digits = 1): string => (Number.isFinite(x) ? x.toFixed(digits) : '—');

const COLUMNS: readonly [string, number][] = [
  ['t s', 5],
  ['phase', 8],
  ['offer/s', 7],
  ['done/s', 7],
  ['%', 5],
  ['p50 ms', 7],
  ['p99 ms', 7],
  ['claim ms', 8],
  ['buf/claim', 9],
  ['dead tup', 9],
  ['live tup', 9],
  ['av', 3],
  ['tbl MiB', 7],
  ['idx MiB', 7],
  ['horizon', 8],
  ['pin age', 8],
  ['rss MiB', 7],
  ['backlog', 7],
];

const line = (cells: readonly string[]): string =>
  cells.map((c, i) => c.padStart(COLUMNS[i]![1])).join(' ');

export function windowHeader(): string {
  return line(COLUMNS.map(([name]) => name));
}

export function windowLine(w: SoakWindow): string {
  return line([
    String(w.endS),
    w.phase,
    num(w.offeredStepsPerS, 0),
    num(w.doneStepsPerS, 0),
    num(w.completionPct, 0),
    num(w.startP50Ms),
    num(w.startP99Ms),
    num(w.claim.meanMs, 2),
    num(w.claim.buffersPerCall, 0),
    String(w.deadTuples),
    String(w.liveTuples),
    String(w.autovacuums),
    MiB(w.tableBytes),
    MiB(w.indexBytes),
    String(w.horizonXids),
    w.pinXids === null ? '—' : String(w.pinXids),
    MiB(w.rssBytes),
    String(w.backlog),
  ]);
}

export function markdown(r: SoakResult): string {
  const out: string[] = [];
  out.push(
    `Command: \`${r.command}\` — ${r.startedAt.slice(0, 16).replace('T', ' ')} UTC, ${Math.round(r.wallSeconds)} s.`,
  );
  out.push(
    `Machine: ${r.machine.cpus} × ${r.machine.cpuModel ?? '?'}, Node ${r.machine.node}; load average ${r.machine.loadAvgAtStart.map((x) => x.toFixed(1)).join(' / ')} at start, ${r.machine.loadAvgAtEnd.map((x) => x.toFixed(1)).join(' / ')} at end.`,
  );
  out.push(
    `PostgreSQL: ${r.postgres.label} — ${r.postgres.version.split(' on ')[0]}; ${Object.entries(
      r.postgres.settings,
    )
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}.${r.git ? ` Checkout ${r.git.slice(0, 10)}.` : ''}`,
  );
  out.push('');
  out.push(
    '| phase | window | offered → done steps/s | insert→start p50 / p99 ms | claim mean ms | buffers / claim | dead tuples | table + indexes MiB | horizon age (xids) | RSS MiB |',
  );
  out.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const e of phaseEnds(r.windows)) {
    for (const [which, w] of [
      ['first', e.first],
      ['last', e.last],
    ] as const) {
      out.push(
        `| ${e.phase} | ${which} (${w.endS} s) | ${num(w.offeredStepsPerS, 0)} → ${num(w.doneStepsPerS, 0)} | ${num(w.startP50Ms)} / ${num(w.startP99Ms)} | ${num(w.claim.meanMs, 2)} | ${num(w.claim.buffersPerCall, 0)} | ${w.deadTuples} | ${MiB(w.tableBytes)} + ${MiB(w.indexBytes)} | ${w.horizonXids} | ${MiB(w.rssBytes)} |`,
      );
    }
  }
  out.push('');
  out.push('| phase | windows | insert→start p50 / p99 / max ms, every sample of the phase |');
  out.push('|---|---|---|');
  for (const e of phaseEnds(r.windows)) {
    const parts = r.windows.filter((w) => w.index >= e.first.index && w.index <= e.last.index);
    const counts = parts.map((w) => w.startLatencies);
    out.push(
      `| ${e.phase} | ${parts.length} | ${num(pooledPercentile(counts, 50))} / ${num(pooledPercentile(counts, 99))} / ${num(pooledPercentile(counts, 100))} |`,
    );
  }
  out.push('');
  out.push(
    '| claim plan | execution ms | buffers (statement) | buffers (pick index scan) | rows claimed |',
  );
  out.push('|---|---|---|---|---|');
  for (const p of r.plans) {
    out.push(
      `| ${p.label} | ${num(p.executionMs, 2)} | ${num(p.buffers, 0)} | ${num(p.pickBuffers, 0)} | ${num(p.rowsClaimed, 0)} |`,
    );
  }
  out.push('');
  for (const p of r.phaseStatements) {
    out.push(
      `Server time by statement, ${p.phase} (${p.seconds} s, ${num(p.totalMs / 1000)} s of statements in all):`,
    );
    out.push('');
    out.push('| statement | calls | total s | mean ms |');
    out.push('|---|---|---|---|');
    for (const t of p.top) {
      out.push(
        `| \`${t.text.replace(/\|/g, '\\|')}\` | ${t.calls} | ${num(t.totalMs / 1000)} | ${num(t.meanMs, 2)} |`,
      );
    }
    out.push('');
  }
  const v = r.verification;
  out.push(
    `Verification: ${v.offered} instances offered, ${v.inserted} inserted, ${v.rows} rows, ${v.done} done, ${v.exact} with the trail a, b, c, ${v.unfinished} unfinished after the drain; ${v.lost} lost, ${v.duplicated} duplicated, ${v.reruns} step re-runs, ${v.insertErrors} insert errors. Readers: ${r.readerReads.count} reads, mean ${num(r.readerReads.meanMs, 0)} ms.`,
  );
  out.push('');
  out.push(
    `Indexes at the end: ${r.indexSizes.map((i) => `${i.index} ${MiB(i.bytes)} MiB`).join(', ')}.`,
  );
  out.push('');
  out.push('| target (issue 30) | this run | met |');
  out.push('|---|---|---|');
  for (const t of r.targets) {
    out.push(
      `| ${t.target} | ${t.reading} | ${t.met === null ? 'n/a' : t.met ? 'yes' : '**no**'} |`,
    );
  }
  out.push('');
  for (const p of r.plans) {
    out.push(`Claim plan, ${p.label}:`);
    out.push('');
    out.push('```');
    out.push(p.text);
    out.push('```');
    out.push('');
  }
  return out.join('\n');
}

/** Writes `file` (JSON) and the Markdown beside it (same name, .md); answers both paths. */
export function writeResult(file: string, r: SoakResult): { json: string; md: string } {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(r, null, 2) + '\n');
  const md = file.replace(/\.json$/, '') + '.md';
  writeFileSync(md, markdown(r) + '\n');
  return { json: file, md };
}
