'use strict';
// Prints a results JSON of `npm run bench` as Markdown tables (used for docs/performance.md):
//   node bench/results-md.cjs bench/results/<file>.json
const fs = require('node:fs');

const file = process.argv[2];
if (!file) {
  console.error('usage: node bench/results-md.cjs bench/results/<file>.json');
  process.exit(1);
}
const d = JSON.parse(fs.readFileSync(file, 'utf8'));

function fmt(v, unit) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  if (unit.endsWith('/s')) return Math.round(v).toLocaleString('en-US');
  if (unit === '×') return v.toFixed(2);
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}
const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const repeats = d.options.repeats;
const multi = d.rows.some((r) => r.values.length > 1);

console.log(
  `Command: \`${d.command}\` — ${d.startedAt.slice(0, 16).replace('T', ' ')} UTC, ${Math.round(d.wallSeconds)} s.`,
);
console.log(
  `Machine: ${d.machine.cpus} × ${d.machine.cpuModel}, ${Math.round(d.machine.memGiB)} GiB, Node ${d.machine.node}; ` +
    `load average ${d.machine.loadAvgAtStart ? d.machine.loadAvgAtStart.map((x) => x.toFixed(1)).join(' / ') : '?'} at start.`,
);
console.log(
  `PostgreSQL: ${d.postgres.label} — ${d.postgres.version.split(' on ')[0]}, fsync=${d.postgres.settings.fsync}, ` +
    `synchronous_commit=${d.postgres.settings.synchronous_commit}. Redis: ${d.redis.label} — ${d.redis.version ?? 'none'}.`,
);
if (d.git && d.git.commit) {
  console.log(
    `Checkout: ${d.git.commit.slice(0, 10)}${d.git.libDirty ? ' with uncommitted changes under lib/' : ''}.`,
  );
}
console.log(
  `gen-durable: ${d.genDurable}. ${repeats} repeat(s)${multi ? ' (min / median / max)' : ''}.`,
);
console.log('');

const cpuCell = (r) => {
  if (!r.cpuPer1k || r.cpuPer1k.length === 0) return '';
  const units = r.n ? (r.scenario === 'fsm3' ? 3 * r.n : r.n) / 1000 : 1;
  const w = med(r.cpu.map((c) => c.workerMs)) / units;
  const pgv = r.cpu.map((c) => c.pgMs).filter((x) => x !== undefined && x !== null);
  const rdv = r.cpu.map((c) => c.redisMs).filter((x) => x !== undefined && x !== null);
  const split = [fmt(w, 'ms'), pgv.length ? fmt(med(pgv) / units, 'ms') : 'n/a'];
  if (rdv.length) split.push(fmt(med(rdv) / units, 'ms'));
  return `${fmt(med(r.cpuPer1k), 'ms')} (${split.join(' + ')})`;
};
const valueCell = (r) => {
  if (r.values.length === 0) return `failed: ${(r.errors || ['?'])[0].split('\n')[0].slice(0, 60)}`;
  return multi
    ? `${fmt(r.min, r.unit)} / **${fmt(r.median, r.unit)}** / ${fmt(r.max, r.unit)}`
    : fmt(r.median, r.unit);
};

const groups = [...new Set(d.rows.map((r) => r.scenario))];
for (const g of groups) {
  const rows = d.rows.filter((r) => r.scenario === g);
  console.log(`**${g}**`);
  console.log('');
  const hasCpu = rows.some((r) => r.cpuPer1k && r.cpuPer1k.length);
  const hasC = rows.some((r) => r.concurrency !== undefined);
  const head = [
    'engine',
    ...(hasC ? ['c'] : []),
    'n',
    'metric',
    'value',
    ...(hasCpu ? ['CPU ms / 1k (worker + pg [+ redis])'] : []),
  ];
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map(() => '---').join('|')}|`);
  for (const r of rows) {
    const cells = [
      r.engine,
      ...(hasC ? [r.concurrency ?? ''] : []),
      r.n ?? '',
      `${r.metric} (${r.unit})`,
      valueCell(r),
      ...(hasCpu ? [cpuCell(r)] : []),
    ];
    console.log(`| ${cells.join(' | ')} |`);
  }
  console.log('');
}
if (d.skipped && d.skipped.length) {
  const byReason = new Map();
  for (const s of d.skipped) {
    const k = `${s.scenario}: ${s.reason}`;
    byReason.set(k, [...(byReason.get(k) || []), s.engine]);
  }
  console.log('Not run:');
  console.log('');
  for (const [why, engines] of byReason) console.log(`- ${why} — ${engines.join(', ')}`);
  console.log('');
}
if (d.ratios && d.ratios.length) {
  console.log(
    'gen-durable median ÷ peer median (in brackets, when there are several repeats, the paired ratio: median [min–max] of same-repeat ratios):',
  );
  console.log('');
  const cell = (p) =>
    `${p.engine} ${p.ratio.toFixed(2)}×` +
    (p.paired && p.paired.n > 1
      ? ` [${p.paired.median.toFixed(2)}: ${p.paired.min.toFixed(2)}–${p.paired.max.toFixed(2)}]`
      : '');
  for (const r of d.ratios)
    console.log(`- ${r.key} [${r.better}]: ${r.peers.map(cell).join(' · ')}`);
}
