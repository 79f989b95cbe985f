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
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
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
const SMALL = ['B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K'];

interface JobState {
  tenant: string;
  at: number;
}

const latencies: number[] = [];
let aFinished = 0;
let recording = false;

@DurableFsm({
  name: 'noisy-job',
  queue: 'noisy',
  fairnessKey: (s) => String(s['tenant']),
})
class NoisyJob {
  @Step() async start(ctx: StepContext<JobState>) {
    const state = ctx.state;
    if (state.tenant !== 'A' && recording) latencies.push(Date.now() - state.at);
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
    await engine.insert(NoisyJob, { state: { tenant, at: Date.now() } });
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
    });
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
    const phase = async (name: string): Promise<void> => {
      sheds[name] = shed;
      shed = 0;
      const now = await checkpoints();
      ckpts[name] = now - ckptMark;
      ckptMark = now;
    };

    // 1. idle queue: B–K alone.
    recording = true;
    const idleCount = await smallTenants(engine, PHASE_S);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    recording = false;
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
    await phase('insert');
    const a0 = aFinished;
    await new Promise((resolve) => setTimeout(resolve, PHASE_S * 1000));
    const aloneRate = (aFinished - a0) / PHASE_S;
    await phase('alone');

    // 3. A's backlog with B–K inserting.
    recording = true;
    const a1 = aFinished;
    const noisyCount = await smallTenants(engine, PHASE_S);
    const noisyRate = (aFinished - a1) / PHASE_S;
    await phase('noisy');
    subscription.unsubscribe();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    recording = false;
    const noisy = [...latencies];
    const left = (await ds.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE status = 'runnable'`,
    )) as { n: number }[];
    await app.close();

    const f = (x: number): string => x.toFixed(0);
    console.log(
      `\nnoisy neighbour: prefetch ${PREFETCH ?? "'auto'"}, queue concurrency ${C}, step ${STEP_MS} ms, phases of ${PHASE_S} s, A backlog ${A_ROWS} (inserted in ${insertS.toFixed(1)} s; ${left[0]!.n} still runnable at the end)\n`,
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
      `\np99 ratio noisy / idle: ${(quantile(noisy, 0.99) / quantile(idle, 0.99)).toFixed(2)}×; A with B–K / alone: ${(noisyRate / aloneRate).toFixed(3)}`,
    );
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

runScript(() => withScratchDatabase('gd_noisy', ({ url }) => noisyNeighbour(url)));
