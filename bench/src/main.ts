// Entry point of `npm run bench` (scripts/run-bench.cjs compiles and runs it).
import { execFileSync } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, SCENARIOS, type Options } from './cli';
import { loadAdapters } from './engines';
import type { Adapter, CaseName } from './engines/types';
import { repoRoot, startInfra, type Infra } from './infra';
import {
  maxMove,
  pairedRatioMap,
  printRatios,
  printTable,
  ratios,
  writeJson,
  type Skipped,
} from './report';
import {
  activeDbs,
  drainCase,
  enqueueCase,
  latencyCase,
  latencyXCase,
  memoryCase,
  scaleCase,
  signalCase,
  type RunCtx,
  type Row,
} from './scenarios';
import {
  runScript,
  SCRIPT_SCENARIOS,
  type ScriptResult,
  type ScriptScenario,
} from './script-scenarios';
import { summary } from './stats';

const CASE_OF_SCENARIO: Record<string, CaseName[]> = {
  drain: ['drain'],
  fsm3: ['fsm3'],
  enqueue: ['enqueue-single', 'enqueue-bulk'],
  'enqueue-single': ['enqueue-single'],
  'enqueue-bulk': ['enqueue-bulk'],
  latency: ['latency', 'latency-xproc'],
  'latency-xproc': ['latency-xproc'],
  signal: ['signal'],
  scale: ['scale'],
  memory: ['memory'],
};

function select(
  opts: Options,
  adapters: Adapter[],
  genDurableMissing: string | undefined,
): { engines: Adapter[]; cases: Set<CaseName>; scripts: ScriptScenario[] } {
  const engineTokens: string[] = [];
  const cases = new Set<CaseName>();
  const scripts: ScriptScenario[] = [];
  for (const t of opts.only) {
    if (CASE_OF_SCENARIO[t]) CASE_OF_SCENARIO[t]!.forEach((c) => cases.add(c));
    else if ((SCRIPT_SCENARIOS as readonly string[]).includes(t)) {
      if (!scripts.includes(t as ScriptScenario)) scripts.push(t as ScriptScenario);
    } else engineTokens.push(t);
  }
  // Only script scenarios named: no engine case runs.
  if (cases.size === 0 && scripts.length === 0)
    Object.values(CASE_OF_SCENARIO)
      .flat()
      .forEach((c) => cases.add(c));
  const known = new Set(adapters.flatMap((a) => [a.id, a.family]).concat(['gen-durable']));
  for (const t of engineTokens) {
    if (!known.has(t)) {
      throw new Error(
        `--only ${t}: not an engine (${[...new Set(adapters.flatMap((a) => [a.id, a.family]))].join(', ')}) nor a scenario (${SCENARIOS.join(', ')})`,
      );
    }
  }
  if (engineTokens.includes('gen-durable') && genDurableMissing) console.log(genDurableMissing);
  const engines =
    engineTokens.length === 0
      ? adapters.filter((a) => a.family !== 'gen-durable-otel') // tracing cost: only when asked
      : adapters.filter((a) => engineTokens.includes(a.id) || engineTokens.includes(a.family));
  return { engines, cases, scripts };
}

function header(
  opts: Options,
  infra: Infra,
  engines: Adapter[],
  genDurableMissing: string | undefined,
  print: (l: string) => void,
): void {
  const cpus = os.cpus();
  print(
    `gen-durable bench — ${opts.quick ? 'quick' : 'full'} run, ${opts.repeats} repeat(s), concurrency ${opts.concurrency.join(',')}`,
  );
  print(
    `machine: ${cpus.length} × ${cpus[0]?.model ?? '?'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  print(
    `PostgreSQL: ${infra.pgLabel} — ${infra.pgVersion.split(' on ')[0]} (fsync=${infra.pgSettings.fsync}, synchronous_commit=${infra.pgSettings.synchronous_commit})`,
  );
  print(`Redis: ${infra.redisLabel}${infra.redisVersion ? ` — ${infra.redisVersion}` : ''}`);
  for (const a of engines) print(`  ${a.id.padEnd(24)} ${a.peer} — ${a.settings}`);
  if (genDurableMissing) print(genDurableMissing);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opts = parseArgs(argv);
  const print = (l: string): void => console.log(l);
  const startedAt = new Date();
  const t0 = performance.now();
  const { adapters, genDurableMissing } = loadAdapters();
  const { engines, cases, scripts } = select(opts, adapters, genDurableMissing);
  const infra = await startInfra(print);
  const onSignal = (): void => {
    print(
      'interrupted: dropping the running case database, stopping the servers the bench started',
    );
    void Promise.allSettled([...activeDbs].map((d) => d.drop()))
      .then(() => infra.stop())
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await run(opts, argv, infra, engines, cases, scripts, genDurableMissing, startedAt, t0);
  } finally {
    await infra.stop();
  }
}

async function run(
  opts: Options,
  argv: string[],
  infra: Infra,
  engines: Adapter[],
  cases: Set<CaseName>,
  scripts: ScriptScenario[],
  genDurableMissing: string | undefined,
  startedAt: Date,
  t0: number,
): Promise<void> {
  const print = (l: string): void => console.log(l);
  const loadAtStart = os.loadavg();
  /** Progress lines carry the run's elapsed time. */
  const progress = (l: string): void =>
    console.log(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s]${l}`);
  const rc: RunCtx = { infra, opts, log: print, vlog: opts.verbose ? print : () => undefined };
  header(opts, infra, engines, genDurableMissing, print);

  const rows = new Map<string, Row>();
  const skipped: Skipped[] = [];
  const row = (key: Omit<Row, 'values'>): Row => {
    const k = [key.scenario, key.engine, key.concurrency ?? '', key.metric].join('|');
    let r = rows.get(k);
    if (!r) rows.set(k, (r = { ...key, values: [] }));
    return r;
  };
  const runnable = (a: Adapter, c: CaseName): boolean => {
    if (!cases.has(c)) return false;
    const why =
      a.unsupported[c] ??
      (opts.quick ? a.notInQuick?.[c] : undefined) ??
      (c === 'scale' && !a.scale
        ? 'scale compares claim cost: raw baseline and gen-durable only'
        : undefined) ??
      (c === 'signal' && !a.signals
        ? 'no signal primitive (an instance parked until a message wakes it)'
        : undefined);
    if (why) {
      if (!skipped.some((s) => s.scenario === c && s.engine === a.id))
        skipped.push({ scenario: c, engine: a.id, reason: why });
      return false;
    }
    if (a.backend === 'redis' && !infra.redisUrl) {
      if (!skipped.some((s) => s.scenario === c && s.engine === a.id))
        skipped.push({ scenario: c, engine: a.id, reason: 'no Redis' });
      return false;
    }
    return true;
  };
  const failed = (r: Row, e: unknown, label: string): void => {
    const msg = (e as Error).message ?? String(e);
    (r.errors ??= []).push(msg);
    progress(`  ${label}: FAILED ${msg.split('\n')[0]}`);
  };

  // drain and fsm3
  /** Each repeat runs every engine once, forward on even repeats and reversed on odd ones. */
  const inOrder = (rep: number): Adapter[] => (rep % 2 === 0 ? engines : [...engines].reverse());
  for (const kind of ['job', 'fsm3'] as const) {
    const scenario: CaseName = kind === 'job' ? 'drain' : 'fsm3';
    for (const c of opts.concurrency) {
      const runRepeat = async (rep: number): Promise<void> => {
        for (const a of inOrder(rep)) {
          if (!runnable(a, scenario)) continue;
          const cap = a.maxN?.[kind]?.[opts.quick ? 1 : 0] ?? Infinity;
          const n = Math.min(kind === 'fsm3' ? opts.fsm3N : opts.n, cap);
          const unit = kind === 'fsm3' ? 'steps/s' : 'jobs/s';
          const r = row({
            scenario,
            engine: a.id,
            concurrency: c,
            n,
            metric: 'throughput',
            unit,
            better: 'higher',
          });
          const label = `${scenario} c=${c} #${rep + 1} ${a.id}`;
          try {
            const o = await drainCase(rc, a, kind, c, n);
            r.values.push(o.rate);
            (r.reps ??= []).push(rep);
            const units = kind === 'fsm3' ? 3 * n : n;
            (r.cpuPer1k ??= []).push((o.cpu.totalMs / units) * 1000);
            (r.cpu ??= []).push(o.cpu);
            (r.extra ??= []).push({ ms: o.ms, startupMs: o.startupMs });
            progress(
              `  ${label}: ${n} ${kind === 'fsm3' ? 'machines' : 'jobs'} in ${(o.ms / 1000).toFixed(2)} s → ${Math.round(o.rate).toLocaleString('en-US')} ${unit}; CPU ${((o.cpu.totalMs / units) * 1000).toFixed(1)} ms/1k (start-up ${o.startupMs.toFixed(0)} ms)`,
            );
          } catch (e) {
            failed(r, e, label);
          }
        }
      };
      let rep = 0;
      for (; rep < opts.repeats; rep++) await runRepeat(rep);
      if (opts.untilStable !== undefined) {
        const mine = (): Row[] =>
          [...rows.values()].filter((r) => r.scenario === scenario && r.concurrency === c);
        let before = pairedRatioMap(mine());
        while (rep < opts.maxRepeats) {
          await runRepeat(rep++);
          const after = pairedRatioMap(mine());
          const moved = maxMove(before, after);
          progress(
            `  ${scenario} c=${c}: after ${rep} repeats the paired ratios moved by at most ${(moved * 100).toFixed(1)} %`,
          );
          if (moved < opts.untilStable) break;
          before = after;
        }
      }
    }
  }

  // enqueue
  for (const mode of ['single', 'bulk'] as const) {
    const scenario: CaseName = mode === 'single' ? 'enqueue-single' : 'enqueue-bulk';
    const n = mode === 'single' ? opts.enqueueSingleN : opts.enqueueBulkN;
    for (let rep = 0; rep < opts.repeats; rep++) {
      for (const a of inOrder(rep)) {
        if (!runnable(a, scenario)) continue;
        const metric =
          mode === 'single' ? 'awaited single inserts, 50 callers' : 'one bulk insert call';
        const r = row({ scenario, engine: a.id, n, metric, unit: 'inserts/s', better: 'higher' });
        const label = `${scenario} #${rep + 1} ${a.id}`;
        try {
          const o = await enqueueCase(rc, a, mode, n);
          r.values.push(o.rate);
          (r.reps ??= []).push(rep);
          (r.cpuPer1k ??= []).push((o.cpu.totalMs / n) * 1000);
          (r.cpu ??= []).push(o.cpu);
          progress(
            `  ${label}: ${n} in ${(o.ms / 1000).toFixed(2)} s → ${Math.round(o.rate).toLocaleString('en-US')} inserts/s`,
          );
        } catch (e) {
          failed(r, e, label);
        }
      }
    }
  }

  // latency
  for (let rep = 0; rep < opts.repeats; rep++) {
    for (const a of inOrder(rep)) {
      if (!runnable(a, 'latency')) continue;
      const label = `latency #${rep + 1} ${a.id}`;
      const rs = (['p50', 'p95', 'p99'] as const).map((p) =>
        row({
          scenario: 'latency',
          engine: a.id,
          n: opts.latencyN,
          metric: `insert→start ${p}`,
          unit: 'ms',
          better: 'lower',
        }),
      );
      try {
        const o = await latencyCase(rc, a, opts.latencyN);
        rs[0]!.values.push(o.p50);
        rs[1]!.values.push(o.p95);
        rs[2]!.values.push(o.p99);
        for (const r of rs) (r.reps ??= []).push(rep);
        (rs[0]!.extra ??= []).push({ timeouts: o.timeouts, samples: o.samples.length });
        progress(
          `  ${label}: p50 ${o.p50.toFixed(2)} ms, p95 ${o.p95.toFixed(2)} ms, p99 ${o.p99.toFixed(2)} ms${o.timeouts ? `, ${o.timeouts} not started within 5 s` : ''}`,
        );
      } catch (e) {
        for (const r of rs) failed(r, e, label);
      }
    }
  }

  // latency across processes
  for (let rep = 0; rep < opts.repeats; rep++) {
    for (const a of inOrder(rep)) {
      if (!runnable(a, 'latency-xproc')) continue;
      const label = `latency-xproc #${rep + 1} ${a.id}`;
      const rs = (['p50', 'p95', 'p99'] as const).map((p) =>
        row({
          scenario: 'latency-xproc',
          engine: a.id,
          n: opts.latencyXN,
          metric: `insert→start ${p}, 2nd process`,
          unit: 'ms',
          better: 'lower',
        }),
      );
      try {
        const o = await latencyXCase(rc, a, opts.latencyXN);
        rs[0]!.values.push(o.p50);
        rs[1]!.values.push(o.p95);
        rs[2]!.values.push(o.p99);
        for (const r of rs) (r.reps ??= []).push(rep);
        (rs[0]!.extra ??= []).push({ timeouts: o.timeouts, samples: o.samples.length });
        progress(
          `  ${label}: p50 ${o.p50.toFixed(2)} ms, p95 ${o.p95.toFixed(2)} ms, p99 ${o.p99.toFixed(2)} ms${o.timeouts ? `, ${o.timeouts} not started within 5 s` : ''}`,
        );
      } catch (e) {
        for (const r of rs) failed(r, e, label);
      }
    }
  }

  // signal round trip
  for (let rep = 0; rep < opts.repeats; rep++) {
    for (const a of inOrder(rep)) {
      if (!runnable(a, 'signal')) continue;
      const label = `signal #${rep + 1} ${a.id}`;
      const rs = (['p50', 'p95', 'p99'] as const).map((p) =>
        row({
          scenario: 'signal',
          engine: a.id,
          n: opts.signalN,
          metric: `signal→woken step ${p}`,
          unit: 'ms',
          better: 'lower',
        }),
      );
      try {
        const o = await signalCase(rc, a, opts.signalN);
        rs[0]!.values.push(o.p50);
        rs[1]!.values.push(o.p95);
        rs[2]!.values.push(o.p99);
        for (const r of rs) (r.reps ??= []).push(rep);
        (rs[0]!.extra ??= []).push({ timeouts: o.timeouts, samples: o.samples.length });
        progress(
          `  ${label}: p50 ${o.p50.toFixed(2)} ms, p95 ${o.p95.toFixed(2)} ms, p99 ${o.p99.toFixed(2)} ms${o.timeouts ? `, ${o.timeouts} not woken within 5 s` : ''}`,
        );
      } catch (e) {
        for (const r of rs) failed(r, e, label);
      }
    }
  }

  // scale (once: each size builds its table; the claim figure is already a median of many claims)
  for (let rep = 0; rep < 1; rep++) {
    for (const a of engines) {
      if (!runnable(a, 'scale')) continue;
      const label = `scale #${rep + 1} ${a.id}`;
      try {
        const o = await scaleCase(rc, a, opts.scaleRows);
        const big = opts.scaleRows.toLocaleString('en-US');
        row({
          scenario: 'scale',
          engine: a.id,
          metric: `${o.metric} @ 10,000 rows`,
          unit: o.unit,
          better: o.better,
        }).values.push(o.small);
        const rb = row({
          scenario: 'scale',
          engine: a.id,
          metric: `${o.metric} @ ${big} rows`,
          unit: o.unit,
          better: o.better,
        });
        rb.values.push(o.big);
        (rb.extra ??= []).push(o.detail);
        const slowdown = o.better === 'lower' ? o.big / o.small : o.small / o.big;
        row({
          scenario: 'scale',
          engine: a.id,
          metric: `slowdown ${big} vs 10,000 rows`,
          unit: '×',
          better: 'lower',
        }).values.push(slowdown);
        progress(
          `  ${label}: ${o.metric}: ${o.small.toFixed(2)} ${o.unit} @ 10k rows, ${o.big.toFixed(2)} ${o.unit} @ ${big} rows (slowdown ${slowdown.toFixed(2)}×)`,
        );
      } catch (e) {
        progress(`  ${label}: FAILED ${(e as Error).message.split('\n')[0]}`);
        (row({
          scenario: 'scale',
          engine: a.id,
          metric: 'scale',
          unit: '',
          better: 'lower',
        }).errors ??= []).push((e as Error).message);
      }
    }
  }

  // memory (once: a peak RSS, not a rate)
  for (let rep = 0; rep < 1; rep++) {
    for (const a of engines) {
      if (!runnable(a, 'memory')) continue;
      const label = `memory #${rep + 1} ${a.id}`;
      const peak = row({
        scenario: 'memory',
        engine: a.id,
        concurrency: 100,
        n: opts.memoryN,
        metric: 'peak RSS while draining',
        unit: 'MB',
        better: 'lower',
      });
      const base = row({
        scenario: 'memory',
        engine: a.id,
        concurrency: 100,
        n: opts.memoryN,
        metric: 'RSS before start',
        unit: 'MB',
        better: 'lower',
      });
      try {
        const o = await memoryCase(rc, a, opts.memoryN);
        peak.values.push(o.peakRssMb);
        base.values.push(o.baselineRssMb);
        (peak.extra ??= []).push({ drainMs: o.ms });
        progress(
          `  ${label}: RSS ${o.baselineRssMb.toFixed(0)} MB before start, peak ${o.peakRssMb.toFixed(0)} MB draining ${opts.memoryN} jobs in ${(o.ms / 1000).toFixed(1)} s`,
        );
      } catch (e) {
        failed(peak, e, label);
      }
    }
  }

  // Script scenarios (gen-durable alone, each its own script and database).
  const scriptResults: ScriptResult[] = [];
  for (const scenario of scripts) {
    if (genDurableMissing) {
      skipped.push({ scenario, engine: 'gen-durable', reason: genDurableMissing });
      continue;
    }
    // The limit of one case, times 5: a full noisy-neighbour run inserts 1 000 000 rows first.
    scriptResults.push(
      await runScript(scenario, opts, infra, (opts.caseTimeoutMs / 1000) * 5, progress),
    );
  }

  const all = [...rows.values()];
  for (const r of scriptResults) {
    print('');
    print(`== ${r.scenario} (${r.command}; ${r.seconds.toFixed(0)} s, exit ${String(r.exitCode)})`);
    print(r.report || '(no report)');
    if (r.exitCode !== 0 && r.stderrTail.trim()) print(r.stderrTail);
  }
  print('');
  print(
    `== Results: min / median / max over ${opts.repeats} repeat(s) — PostgreSQL: ${infra.pgLabel}; Redis: ${infra.redisLabel}`,
  );
  printTable(all, print);
  if (skipped.length > 0) {
    print('');
    print('Not run:');
    const byReason = new Map<string, string[]>();
    for (const s of skipped)
      byReason.set(`${s.scenario}: ${s.reason}`, [
        ...(byReason.get(`${s.scenario}: ${s.reason}`) ?? []),
        s.engine,
      ]);
    for (const [why, engines] of byReason) print(`  ${why} — ${engines.join(', ')}`);
  }
  print('');
  print('== gen-durable median / peer median');
  printRatios(all, genDurableMissing, print);

  const finishedAt = new Date();
  const file =
    opts.json ??
    path.join(
      repoRoot(),
      'bench',
      'results',
      `${startedAt.toISOString().replace(/[:.]/g, '-')}${opts.quick ? '-quick' : ''}.json`,
    );
  writeJson(file, {
    version: 1,
    command: argv.length ? `npm run bench -- ${argv.join(' ')}` : 'npm run bench',
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallSeconds: (performance.now() - t0) / 1000,
    options: opts,
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memGiB: os.totalmem() / 2 ** 30,
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      loadAvgAtStart: loadAtStart,
      loadAvgAtEnd: os.loadavg(),
    },
    postgres: { label: infra.pgLabel, version: infra.pgVersion, settings: infra.pgSettings },
    redis: { label: infra.redisLabel, version: infra.redisVersion },
    engines: engines.map((a) => ({
      id: a.id,
      peer: a.peer,
      settings: a.settings,
      backend: a.backend,
    })),
    genDurable: genDurableMissing ?? 'measured',
    git: gitState(),
    rows: all.map((r) => ({ ...r, ...summary(r.values) })),
    ratios: genDurableMissing ? [] : ratios(all),
    skipped,
    scripts: scriptResults,
  });
  print('');
  print(
    `JSON: ${path.relative(process.cwd(), file)} (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
  );
}

/** Commit of the checkout and whether lib/ has uncommitted changes (the gen-durable measured). */
function gitState(): { commit?: string; libDirty?: boolean } {
  try {
    const cwd = repoRoot();
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd }).toString().trim();
    const libDirty =
      execFileSync('git', ['status', '--porcelain', '--', 'lib'], { cwd }).toString().trim()
        .length > 0;
    return { commit, libDirty };
  } catch {
    return {};
  }
}

// Connections an engine left open are terminated by DROP DATABASE … WITH (FORCE) at the end of a
// case; an engine's pool without an error listener would take the run down with it.
process.on('uncaughtException', (e: Error & { code?: string }) => {
  if (e.code === '57P01' || /Connection terminated|terminating connection/.test(e.message)) {
    console.log(`  (ignored after a case: ${e.message})`);
    return;
  }
  console.error(e.stack ?? String(e));
  process.exit(1);
});

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error((e as Error).stack ?? String(e));
    process.exit(1);
  },
);
