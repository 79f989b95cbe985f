/**
 * `npm run bench:noisy-neighbour` (docs/many-tenants.md "Fair claims by key", issue 31): one
 * queue of concurrency C (default 20) whose job carries `fairnessKey: state.tenant` and
 * sleeps STEP_MS (default 10) ms. Three phases of PHASE_S seconds (default 20) on one engine:
 * 1. idle: tenants B–K each insert one job a second (`insert`), nothing else: their
 *    insert → start latency (p50, p99) on an idle queue;
 * 2. A alone: tenant A's backlog of A_ROWS (default 150 000, `insertAll` in chunks of 10 000)
 *    is drained with B–K quiet: A's throughput (jobs finished per second);
 * 3. noisy: A's backlog still draining, B–K insert one a second each again: their insert →
 *    start latency while A's backlog drains, and A's throughput beside them.
 * The latency is measured in-process (Date.now() at the insert call, stored in the state, and
 * at the step's start). Uses DATABASE_URL (a server where it may CREATE DATABASE) or the
 * embedded PostgreSQL. PREFETCH sets the module's `prefetch` (default: not given, `'auto'`).
 * A's backlog is followed by `ANALYZE gen_durable`, as autovacuum would run in production
 * (`ANALYZE=0` leaves it out; see the comment where it runs).
 * After the table, the slowest 1 % of B–K's rows in each phase are split into the insert call
 * (call → its promise resolved) and the rest (→ the step's start), with the picks that ended
 * in between (rows, demand, ms), the GC pauses that overlapped the row, and the event loop's
 * delay per phase: where a late row waited.
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { DataSource } from 'typeorm';

import { done, DurableFsm, EngineService, GenDurableModule, Step, type StepContext } from '../lib';
import { migrateUp } from '../lib/schema/migrator';
import { runScript, withScratchDatabase } from './scratch-database';

const C = Number(process.env['C'] ?? 20);
const STEP_MS = Number(process.env['STEP_MS'] ?? 10);
const PHASE_S = Number(process.env['PHASE_S'] ?? 20);
const A_ROWS = Number(process.env['A_ROWS'] ?? 150_000);
/** The module's `prefetch` (default: its own default, `'auto'`); `PREFETCH=0` turns it off. */
const PREFETCH = process.env['PREFETCH'];
/** ANALYZE gen_durable after A's backlog is in (default); `ANALYZE=0` leaves it out. */
const ANALYZE = process.env['ANALYZE'] !== '0';
const SMALL = ['B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K'];

interface JobState {
  tenant: string;
  at: number;
}

const latencies: number[] = [];
let aFinished = 0;
let recording = false;

/** One B–K row's times (Date.now() ms): the insert call, its promise resolved, the step's start. */
interface Sample {
  call: number;
  returned?: number;
  started?: number;
}
const samples = new Map<string, Sample>();
/** Picks (pick:stop) and GC pauses as [end ms, …], for the split of the slowest rows. */
const picks: { end: number; count: number; demand: number; ms: number }[] = [];
const gcs: { start: number; ms: number }[] = [];
/** Flushes (flush:stop) and the most rows awaiting commit a poll tick saw, per phase. */
const flushes: { count: number; ms: number }[] = [];
let maxAwaiting = 0;

@DurableFsm({
  name: 'noisy-job',
  queue: 'noisy',
  fairnessKey: (s) => String(s['tenant']),
})
class NoisyJob {
  @Step() async start(ctx: StepContext<JobState>) {
    const state = ctx.state;
    if (state.tenant !== 'A' && recording) {
      latencies.push(Date.now() - state.at);
      const sample = samples.get(ctx.id);
      if (sample) sample.started = Date.now();
      else samples.set(ctx.id, { call: state.at, started: Date.now() });
    }
    await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    if (state.tenant === 'A') aFinished++;
    return done({});
  }
}

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

/** B–K insert one job a second each, staggered, for `seconds`; resolves when all are in. */
async function smallTenants(engine: EngineService, seconds: number): Promise<number> {
  let n = 0;
  const step = 1000 / SMALL.length;
  const end = Date.now() + seconds * 1000;
  let i = 0;
  while (Date.now() < end) {
    const tenant = SMALL[i % SMALL.length]!;
    i++;
    const at = Date.now();
    const id = await engine.insert(NoisyJob, { state: { tenant, at } });
    const sample = samples.get(id);
    if (sample) sample.returned = Date.now();
    else samples.set(id, { call: at, returned: Date.now() });
    n++;
    await new Promise((resolve) => setTimeout(resolve, step));
  }
  return n;
}

async function noisyNeighbour(url: string): Promise<void> {
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    @Module({
      imports: [
        GenDurableModule.forRoot({
          dataSource: ds,
          queues: { noisy: C },
          gc: false,
          ...(PREFETCH === undefined ? {} : { prefetch: Number(PREFETCH) }),
        }),
      ],
      providers: [NoisyJob],
    })
    class NoisyModule {}
    const app = await NestFactory.createApplicationContext(NoisyModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    // Prefetched rows released by 'auto' (scheduler:shed), per phase.
    let shed = 0;
    const sheds: Record<string, number> = {};
    const subscription = engine.events$.subscribe((e) => {
      if (e.event === 'scheduler:shed') shed += e.measurements['released'] ?? 0;
      if (e.event === 'flush:stop') {
        flushes.push({
          count: e.measurements['count'] ?? 0,
          ms: e.measurements['durationMs'] ?? 0,
        });
      }
      if (e.event === 'scheduler:saturation') {
        maxAwaiting = Math.max(maxAwaiting, e.measurements['awaitingCommit'] ?? 0);
      }
      if (e.event === 'pick:stop' && recording) {
        picks.push({
          end: Date.now(),
          count: e.measurements['count'] ?? 0,
          demand: e.measurements['demand'] ?? 0,
          ms: e.measurements['durationMs'] ?? 0,
        });
      }
    });
    const gcObserver = new PerformanceObserver((list) => {
      for (const g of list.getEntries()) {
        gcs.push({ start: performance.timeOrigin + g.startTime, ms: g.duration });
      }
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    const loops: Record<string, string> = {};
    const splits: Record<string, string[]> = {};
    const split = (name: string): void => {
      const rows = [...samples.values()].filter((x) => x.started !== undefined);
      rows.sort((a, b) => b.started! - b.call - (a.started! - a.call));
      const worst = rows.slice(0, Math.max(1, Math.ceil(rows.length / 100)));
      splits[name] = worst.map((x) => {
        const returned = x.returned ?? x.started!;
        const inPicks = picks
          .filter((p) => p.end >= x.call && p.end <= x.started!)
          .map((p) => `${p.count}/${p.demand} ${p.ms.toFixed(1)}`);
        const gcMs = gcs
          .filter((g) => g.start + g.ms >= x.call && g.start <= x.started!)
          .reduce((sum, g) => sum + g.ms, 0);
        return `${x.started! - x.call} ms = insert ${returned - x.call} + ${x.started! - returned}; picks ended in it (rows/demand ms): ${inPicks.join(', ') || 'none'}; GC ${gcMs.toFixed(1)} ms`;
      });
      loops[name] =
        `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, max ${(loopDelay.max / 1e6).toFixed(1)} ms`;
      samples.clear();
      picks.length = 0;
      gcs.length = 0;
      loopDelay.reset();
    };
    // Checkpoints started during each phase (pg_stat_checkpointer from PostgreSQL 17,
    // pg_stat_bgwriter before): a checkpoint's writes slow every statement for a while,
    // inserts and claims alike.
    const checkpoints = async (): Promise<number> => {
      const r = (await ds
        .query(`SELECT (num_timed + num_requested)::int AS n FROM pg_stat_checkpointer`)
        .catch(() =>
          ds.query(`SELECT (checkpoints_timed + checkpoints_req)::int AS n FROM pg_stat_bgwriter`),
        )) as { n: number }[];
      return r[0]!.n;
    };
    const ckpts: Record<string, number> = {};
    let ckptMark = await checkpoints();
    const flushStats: Record<string, string> = {};
    const phase = async (name: string): Promise<void> => {
      sheds[name] = shed;
      shed = 0;
      const ms = flushes.map((x) => x.ms);
      const rows = flushes.reduce((sum, x) => sum + x.count, 0);
      flushStats[name] =
        `${flushes.length} flushes, ${(rows / Math.max(1, flushes.length)).toFixed(0)} rows each, ` +
        `p50 ${quantile(ms, 0.5).toFixed(1)} / p99 ${quantile(ms, 0.99).toFixed(1)} / max ${Math.max(0, ...ms).toFixed(1)} ms; ` +
        `most awaiting commit at a poll tick ${maxAwaiting}`;
      flushes.length = 0;
      maxAwaiting = 0;
      const now = await checkpoints();
      ckpts[name] = now - ckptMark;
      ckptMark = now;
    };

    // 1. idle queue: B–K alone.
    loopDelay.enable();
    recording = true;
    const idleCount = await smallTenants(engine, PHASE_S);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    recording = false;
    split('idle');
    await phase('idle');
    const idle = [...latencies];
    latencies.length = 0;

    // 2. A's backlog, then A alone.
    const t0 = Date.now();
    for (let done = 0; done < A_ROWS; done += 10_000) {
      const n = Math.min(10_000, A_ROWS - done);
      await engine.insertAll(
        NoisyJob,
        Array.from({ length: n }, () => ({ state: { tenant: 'A', at: Date.now() } })),
      );
    }
    const insertS = (Date.now() - t0) / 1000;
    // What autovacuum's ANALYZE does in production once a table grows this much: without it
    // (this machine's server runs with autovacuum off), a pooled connection whose generic
    // plan of the flush was built while the table held B–K's few hundred rows keeps it, and
    // that plan is a sequential scan of the grown table (docs/performance.md "Noisy
    // neighbour"). ANALYZE=0 leaves it out.
    if (ANALYZE) await ds.query('ANALYZE gen_durable');
    await phase('insert');
    loopDelay.reset();
    const a0 = aFinished;
    await new Promise((resolve) => setTimeout(resolve, PHASE_S * 1000));
    const aloneRate = (aFinished - a0) / PHASE_S;
    await phase('alone');
    const aloneLoop = `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, max ${(loopDelay.max / 1e6).toFixed(1)} ms`;
    loopDelay.reset();

    // 3. A's backlog with B–K inserting.
    recording = true;
    const a1 = aFinished;
    const noisyCount = await smallTenants(engine, PHASE_S);
    const noisyRate = (aFinished - a1) / PHASE_S;
    await phase('noisy');
    subscription.unsubscribe();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    recording = false;
    split('noisy');
    loopDelay.disable();
    gcObserver.disconnect();
    const noisy = [...latencies];
    const left = (await ds.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE status = 'runnable'`,
    )) as { n: number }[];
    await app.close();

    const f = (x: number): string => x.toFixed(0);
    console.log(
      `\nnoisy neighbour: prefetch ${PREFETCH ?? "'auto'"}, ${ANALYZE ? 'ANALYZE after the backlog' : 'no ANALYZE'}, queue concurrency ${C}, step ${STEP_MS} ms, phases of ${PHASE_S} s, A backlog ${A_ROWS} (inserted in ${insertS.toFixed(1)} s; ${left[0]!.n} still runnable at the end)\n`,
    );
    console.log('| measure | value |\n|---|---|');
    console.log(
      `| B–K insert → start, idle queue (${idle.length} of ${idleCount} started) | p50 ${f(quantile(idle, 0.5))} ms, p99 ${f(quantile(idle, 0.99))} ms |`,
    );
    console.log(
      `| B–K insert → start, A's backlog draining (${noisy.length} of ${noisyCount} started) | p50 ${f(quantile(noisy, 0.5))} ms, p99 ${f(quantile(noisy, 0.99))} ms |`,
    );
    console.log(`| A throughput alone | ${f(aloneRate)} jobs/s |`);
    console.log(
      `| prefetched rows shed ('auto', scheduler:shed): idle, insert, alone, noisy | ${['idle', 'insert', 'alone', 'noisy'].map((k) => sheds[k] ?? 0).join(', ')} |`,
    );
    console.log(`| A throughput with B–K inserting | ${f(noisyRate)} jobs/s |`);
    console.log(
      `| checkpoints started (pg_stat_bgwriter): idle, insert, alone, noisy | ${['idle', 'insert', 'alone', 'noisy'].map((k) => ckpts[k] ?? 0).join(', ')} |`,
    );
    console.log(
      `| flushes: idle; insert; A alone; noisy | ${['idle', 'insert', 'alone', 'noisy'].map((k) => flushStats[k]).join('; ')} |`,
    );
    console.log(
      `| event loop delay: idle; A alone; noisy | ${loops['idle']}; ${aloneLoop}; ${loops['noisy']} |`,
    );
    for (const name of ['idle', 'noisy']) {
      console.log(
        `\nslowest 1 % of B–K, ${name}:\n${(splits[name] ?? []).map((l) => `- ${l}`).join('\n')}`,
      );
    }
    console.log(
      `\np99 ratio noisy / idle: ${(quantile(noisy, 0.99) / quantile(idle, 0.99)).toFixed(2)}×; A with B–K / alone: ${(noisyRate / aloneRate).toFixed(3)}`,
    );
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

runScript(() => withScratchDatabase('gd_noisy', ({ url }) => noisyNeighbour(url)));
