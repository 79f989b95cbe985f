/**
 * `npm run soak` (docs/performance.md, "Soak"): a 3-step FSM at an offered rate through four
 * phases — clean, pinned (an idle transaction holds an XID), readers (the pin stays and
 * REPEATABLE READ readers join it), recovery (both released) — on a PostgreSQL of its own with
 * autovacuum on; a table line every window, then a JSON and Markdown result under
 * bench/results/. Exits non-zero only on a lost or duplicated commit or a harness error, never
 * on a latency figure. `npm run soak:short` is the CI variant.
 *
 *   npm run soak -- --rate 1000 --phase-seconds 120 [--concurrency 10] [--pg 15|17|18]
 *   npm run soak -- --engine pgq --rate 1000 --phase-seconds 120      (PgQ, PostgreSQL 15)
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';

import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { EngineService, GenDurableModule } from '../../lib';
import { migrateUp } from '../../lib/schema/migrator';
import { type ClaimPlan, explainClaim } from './claim-plan';
import { checkCommits } from './commit-check';
import { HorizonPin, RepeatableReadReaders } from './horizon-holders';
import { OfferedInserter } from './offered-inserter';
import { phaseOfWindow, phaseSchedule, type PhaseName, windowCount } from './phase-schedule';
import { ServerSampler } from './server-sampler';
import { startSoakCluster } from './soak-cluster';
import { ledger, Soak3 } from './soak-fsm';
import { runPgqSoak } from './pgq-soak';
import { parseSoakOptions, type SoakOptions } from './soak-options';
import {
  type SoakResult,
  type Verification,
  windowHeader,
  windowLine,
  writeResult,
} from './soak-report';
import { type PhaseStatements, phaseStatements } from './phase-statements';
import { readTargets } from './soak-targets';
import { type SoakWindow, statementWindow, windowRates } from './window-stats';

const ROOT = join(__dirname, '..', '..');
const SETTINGS = [
  'autovacuum',
  'autovacuum_naptime',
  'autovacuum_vacuum_scale_factor',
  'autovacuum_vacuum_insert_scale_factor',
  'fsync',
  'synchronous_commit',
  'shared_buffers',
  'shared_preload_libraries',
];

const sleepUntil = (at: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));
const print = (text: string): void => void process.stdout.write(`${text}\n`);

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT }).toString().trim();
  } catch {
    return undefined;
  }
}

/**
 * Counts what the table holds for the soak's FSM once the backlog has had its drain time:
 * hot and archived rows (the view gen_durable_all, docs/archive.md), since the GC sweep moves
 * done instances out of gen_durable one minute after they end.
 */
async function verify(
  client: Client,
  offered: number,
  inserted: number,
  insertErrors: number,
): Promise<Verification> {
  const { rows } = await client.query<{
    rows: string;
    done: string;
    exact: string;
    long: string;
    live: string;
  }>(
    `SELECT count(*) AS rows,
            count(*) FILTER (WHERE status = 'done') AS done,
            count(*) FILTER (WHERE status = 'done' AND result->'trail' = '["a","b","c"]'::jsonb) AS exact,
            count(*) FILTER (WHERE jsonb_array_length(coalesce(result->'trail', state->'trail', '[]'::jsonb))
                                   > CASE status WHEN 'done' THEN 3 ELSE 2 END) AS long,
            count(*) FILTER (WHERE status NOT IN ('done', 'failed', 'cancelled')) AS live
       FROM gen_durable_all WHERE fsm = 'soak3'`,
  );
  const r = rows[0]!;
  const [count, done, exact, long, live] = [r.rows, r.done, r.exact, r.long, r.live].map(
    Number,
  ) as [number, number, number, number, number];
  return {
    offered,
    inserted,
    rows: count,
    done,
    exact,
    ...checkCommits({ inserted, rows: count, done, exact, long, live }),
    reruns: ledger.reruns,
    insertErrors,
  };
}

/** `--engine pgq`: PgQ on the private PostgreSQL 15 cluster (bench/soak/pgq-soak.ts). */
async function mainPgq(opts: SoakOptions, argv: readonly string[]): Promise<number> {
  const startedAt = new Date();
  const loadAvgAtStart = os.loadavg();
  const wall0 = performance.now();
  print(
    `soak (pgq): ${opts.rate} events/s offered, phases ${opts.phaseSeconds} s, recovery ${opts.recoverySeconds} s, PostgreSQL 15`,
  );
  const cluster = await startSoakCluster(15);
  try {
    const admin = new Client({ connectionString: cluster.url });
    await admin.connect();
    const { rows } = await admin.query<{ version: string }>('SELECT version()');
    await admin.end();
    print(`${cluster.label}: ${rows[0]?.version.split(' on ')[0]}`);
    const r = await runPgqSoak(cluster, opts, print);
    const lost = r.inserted - r.consumed;
    print('');
    print(
      `verification: ${r.inserted} inserted, ${r.consumed} consumed, ${lost} not consumed after the drain, ${r.duplicates} duplicated; ${r.rotations} table rotations`,
    );
    const file =
      opts.out ??
      join(
        ROOT,
        'bench',
        'results',
        `soak-pgq-${startedAt.toISOString().replace(/[:.]/g, '-')}${opts.short ? '-short' : ''}.json`,
      );
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      JSON.stringify(
        {
          command: `npm run soak -- ${argv.join(' ')}`,
          startedAt: startedAt.toISOString(),
          wallSeconds: (performance.now() - wall0) / 1000,
          machine: { cpus: os.cpus().length, loadAvgAtStart, loadAvgAtEnd: os.loadavg() },
          git: gitCommit(),
          postgres: { label: cluster.label, version: rows[0]?.version },
          options: opts,
          ...r,
        },
        null,
        2,
      ) + '\n',
    );
    print(`results: ${relative(process.cwd(), file)}`);
    return lost > 0 || r.duplicates > 0 ? 1 : 0;
  } finally {
    await cluster.stop();
  }
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const opts = parseSoakOptions(argv);
  if (opts.engine === 'pgq') return mainPgq(opts, argv);
  const schedule = phaseSchedule(
    opts.phaseSeconds,
    opts.recoverySeconds,
    opts.windowSeconds,
    opts.phaseLengths,
  );
  const startedAt = new Date();
  const loadAvgAtStart = os.loadavg();
  const wall0 = performance.now();
  print(
    `soak: ${opts.rate} steps/s offered (${(opts.rate / 3).toFixed(1)} instances/s), concurrency ${opts.concurrency}, ` +
      `phases ${schedule.phases.map((p) => `${p.name} ${p.seconds} s`).join(', ')}, pin ${opts.pin}, PostgreSQL ${opts.pg}`,
  );
  const cluster = await startSoakCluster(opts.pg);
  const admin = new Client({ connectionString: cluster.url });
  let ds: DataSource | undefined;
  let sampler: ServerSampler | undefined;
  let pin: HorizonPin | undefined;
  let readers: RepeatableReadReaders | undefined;
  let closeApp: (() => Promise<void>) | undefined;
  let db: Client | undefined;
  admin.on('error', () => undefined);
  try {
    await admin.connect();
    await admin.query('CREATE DATABASE gd_soak');
    const url = new URL(cluster.url);
    url.pathname = '/gd_soak';
    const dbUrl = url.toString();
    ds = new DataSource({ type: 'postgres', url: dbUrl, extra: { max: 20 } });
    await ds.initialize();
    const source = ds;
    await migrateUp({
      query: (text, params) => source.query(text, params),
      inTransaction: false,
    });
    sampler = await ServerSampler.connect(dbUrl);
    db = new Client({ connectionString: dbUrl, application_name: 'gd-soak-admin' });
    db.on('error', () => undefined);
    await db.connect();
    const { rows: versionRows } = await db.query<{ version: string }>('SELECT version()');
    const { rows: settingRows } = await db.query<{
      name: string;
      setting: string;
      unit: string | null;
    }>('SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)', [SETTINGS]);
    const settings = Object.fromEntries(
      settingRows.map((s) => [s.name, s.unit ? `${s.setting} ${s.unit}` : s.setting]),
    );
    print(
      `${cluster.label}: ${versionRows[0]?.version.split(' on ')[0]}; ${JSON.stringify(settings)}`,
    );

    @Module({
      imports: [
        GenDurableModule.forRoot({ dataSource: ds, queues: { default: opts.concurrency } }),
      ],
      providers: [Soak3],
    })
    class SoakModule {}
    const app = await NestFactory.createApplicationContext(SoakModule, {
      logger: ['error', 'warn'],
    });
    closeApp = () => app.close();
    const engine = app.get(EngineService);
    await app.init();
    await db.query('SELECT pg_stat_statements_reset()');

    const inserter = new OfferedInserter(engine, opts.rate / 3);
    const windows: SoakWindow[] = [];
    const plans: ClaimPlan[] = [];
    let claimBefore = (await sampler.read(null)).claim;
    let offered0 = 0;
    let steps0 = 0;
    let phase: PhaseName | undefined;
    const phaseTimes: PhaseStatements[] = [];
    const statementsOf = sampler;
    let statementsAt = await statementsOf.statements();
    let phaseStartS = 0;
    const closePhase = async (endS: number): Promise<void> => {
      if (phase === undefined) return;
      const now = await statementsOf.statements();
      phaseTimes.push(phaseStatements(phase, endS - phaseStartS, statementsAt, now, 8));
      statementsAt = now;
      phaseStartS = endS;
    };
    ledger.takeLatencies();
    const t0 = performance.now();
    inserter.start();
    print(windowHeader());
    for (let i = 0; i < windowCount(schedule); i++) {
      const next = phaseOfWindow(schedule, i).name;
      if (next !== phase) {
        await closePhase(i * opts.windowSeconds);
        if (next === 'pinned') {
          pin = await HorizonPin.open(dbUrl, opts.pin);
          plans.push(...(await explainClaim(dbUrl, 'pin start', opts.concurrency)));
        } else if (next === 'readers') {
          plans.push(...(await explainClaim(dbUrl, 'readers start', opts.concurrency)));
          readers = await RepeatableReadReaders.start(
            dbUrl,
            opts.readers,
            2 * opts.windowSeconds * 1000,
          );
        } else if (next === 'recovery') {
          plans.push(...(await explainClaim(dbUrl, 'pin end', opts.concurrency)));
          const last = windows[windows.length - 1];
          if (!last || last.pinXids === null || last.pinXids <= 0) {
            throw new Error(`the pin held no horizon at its end (age ${String(last?.pinXids)})`);
          }
          await readers?.stop();
          await pin?.release();
          pin = undefined;
        }
        phase = next;
      }
      await sleepUntil(t0 + (i + 1) * opts.windowSeconds * 1000);
      const reading = await sampler.read(pin?.pid ?? null);
      const offered = inserter.offered;
      const steps = ledger.stepsRun;
      windows.push({
        index: i,
        endS: (i + 1) * opts.windowSeconds,
        phase: next,
        ...windowRates(
          3 * (offered - offered0),
          steps - steps0,
          opts.windowSeconds,
          ledger.takeLatencies(),
        ),
        claim: statementWindow(claimBefore, reading.claim),
        liveTuples: reading.liveTuples,
        deadTuples: reading.deadTuples,
        autovacuums: reading.autovacuums,
        tableBytes: reading.tableBytes,
        indexBytes: reading.indexBytes,
        horizonXids: reading.horizonXids,
        pinXids: reading.pinXids,
        horizonHolder: reading.horizonHolder,
        rssBytes: process.memoryUsage.rss(),
        backlog: inserter.inserted - ledger.instancesFinished,
      });
      print(windowLine(windows[windows.length - 1]!));
      claimBefore = reading.claim;
      offered0 = offered;
      steps0 = steps;
    }
    await closePhase(windows.length * opts.windowSeconds);
    plans.push(...(await explainClaim(dbUrl, 'recovery end', opts.concurrency)));
    await inserter.stop();
    const drainBy = performance.now() + opts.drainSeconds * 1000;
    while (ledger.instancesFinished < inserter.inserted && performance.now() < drainBy) {
      await sleepUntil(performance.now() + 200);
    }
    // The last step's outcome commits after its run returns: let the flushers finish.
    await closeApp();
    closeApp = undefined;
    const verification = await verify(db, inserter.offered, inserter.inserted, inserter.errors);
    const indexSizes = await sampler.indexSizes();
    const readMs = readers?.readMs ?? [];
    const result: SoakResult = {
      command: `npm run soak${argv.length ? ` -- ${argv.join(' ')}` : ''}`,
      startedAt: startedAt.toISOString(),
      wallSeconds: (performance.now() - wall0) / 1000,
      machine: {
        cpus: os.cpus().length,
        cpuModel: os.cpus()[0]?.model,
        loadAvgAtStart,
        loadAvgAtEnd: os.loadavg(),
        node: process.version,
      },
      git: gitCommit(),
      postgres: {
        label: cluster.label,
        version: versionRows[0]?.version ?? '?',
        settings,
      },
      options: opts,
      windows,
      plans,
      phaseStatements: phaseTimes,
      indexSizes,
      readerReads: {
        count: readMs.length,
        meanMs: readMs.length ? readMs.reduce((a, b) => a + b, 0) / readMs.length : NaN,
      },
      verification,
      targets: readTargets(windows, opts.windowSeconds, verification.lost, verification.duplicated),
    };
    const file =
      opts.out ??
      join(
        ROOT,
        'bench',
        'results',
        `soak-pg${opts.pg}-${startedAt.toISOString().replace(/[:.]/g, '-')}${opts.short ? '-short' : ''}.json`,
      );
    const written = writeResult(file, result);
    const v = verification;
    print('');
    print(
      `verification: ${v.inserted} inserted, ${v.done} done, ${v.exact} with trail a,b,c, ${v.unfinished} unfinished after the drain; ${v.lost} lost, ${v.duplicated} duplicated; ${v.reruns} step re-runs; ${v.insertErrors} insert errors`,
    );
    for (const p of phaseTimes) {
      print(
        `server time, ${p.phase} (${p.seconds} s): ${(p.totalMs / 1000).toFixed(1)} s of statements; most: ${p.top
          .slice(0, 4)
          .map((t) => `${(t.totalMs / 1000).toFixed(1)} s in ${t.calls} × "${t.text.slice(0, 40)}"`)
          .join('; ')}`,
      );
    }
    for (const t of result.targets) {
      print(
        `target ${t.met === null ? 'n/a' : t.met ? 'met ' : 'MISSED'}: ${t.target}: ${t.reading}`,
      );
    }
    print(
      `results: ${relative(process.cwd(), written.json)}, ${relative(process.cwd(), written.md)}`,
    );
    return v.lost > 0 || v.duplicated > 0 ? 1 : 0;
  } finally {
    await readers?.stop().catch(() => undefined);
    await pin?.release().catch(() => undefined);
    await closeApp?.().catch(() => undefined);
    await sampler?.close().catch(() => undefined);
    await db?.end().catch(() => undefined);
    await ds?.destroy().catch(() => undefined);
    await admin.end().catch(() => undefined);
    await cluster.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`soak: harness error: ${String((err as Error).stack ?? err)}\n`);
    process.exit(2);
  },
);
