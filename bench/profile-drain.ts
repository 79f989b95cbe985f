/**
 * `npm run profile:drain`: one gen-durable drain in this process, with every statement timed
 * from the client (count, total and mean ms by statement name), the claims' round trip split
 * into the server's part (the trailer's `exec_ms`) and the rest, the pick and flush batch
 * sizes, and the worker's CPU per 1 000 jobs — the figures behind docs/performance.md's
 * profiles. Add `node --cpu-prof` (see the npm script) for a V8 CPU profile of the same run.
 *
 *   N=20000 C=10 OPTS='{"prefetch":0}' KIND=job npm run profile:drain
 *
 * N jobs (KIND=job), request-scoped jobs (KIND=scoped), transactional jobs (KIND=tx: `perform`
 * is transactional, docs/transactional-steps.md, and runs no statement), transactional jobs
 * that insert one row through `ctx.manager` (KIND=txw: the row commits with the outcome), plain
 * jobs that insert the same row through the DataSource (KIND=jobw: autocommit, at-least-once)
 * or 3-step machines (KIND=fsm3) are inserted with one insertAll, then a worker with
 * `queues: { default: C }` plus the JSON module options OPTS drains them (a pool of 10, or
 * C + 4 for KIND=tx/txw/jobw, whose steps each hold a connection while they write; POOL
 * overrides it). Uses
 * DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 *
 * HEAP_PROFILE=file.heapprofile samples the drain's allocations with the inspector's sampling
 * heap profiler (open the file in Chrome DevTools' Memory tab): every allocation by default,
 * or with HEAP_PROFILE_MINOR=0 only what was not collected by a scavenge, i.e. what reached
 * the old generation (docs/performance.md "Allocation per step").
 */
import 'reflect-metadata';

import { Injectable, Module, Scope } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { PerformanceObserver } from 'node:perf_hooks';

import { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  EngineService,
  type GenDurableEvent,
  type GenDurableOptions,
  GenDurableModule,
  next,
  Step,
  type StepContext,
  type TransactionalStepContext,
} from '../lib';
import { SqlExecutor } from '../lib/db/sql-executor';
import { migrateUp } from '../lib/schema/migrator';
import { runScript, withScratchDatabase } from './scratch-database';

const N = Number(process.env['N'] ?? 20_000);
const HEAP_PROFILE = process.env['HEAP_PROFILE'];

/** Starts the sampling heap profiler when HEAP_PROFILE is set; the answer stops it and writes it. */
async function heapProfile(): Promise<() => Promise<void>> {
  if (HEAP_PROFILE === undefined) return () => Promise.resolve();
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object): Promise<unknown> =>
    new Promise((resolve, reject) =>
      session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
    );
  await post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env['HEAP_PROFILE_MINOR'] !== '0',
  });
  return async () => {
    const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: unknown };
    writeFileSync(HEAP_PROFILE, JSON.stringify(profile));
    session.disconnect();
  };
}
const C = Number(process.env['C'] ?? 50);
const KIND =
  (['fsm3', 'scoped', 'tx', 'txw', 'jobw'] as const).find((k) => k === process.env['KIND']) ??
  'job';
const OPTS = JSON.parse(process.env['OPTS'] ?? '{}') as Partial<GenDurableOptions>;

let finals = 0;
let firstStart = 0;
let allDone: () => void = () => undefined;
const finished = new Promise<void>((resolve) => (allDone = resolve));
const final = (): void => {
  if (++finals === N) allDone();
};
const start = (): void => {
  if (firstStart === 0) firstStart = performance.now();
};

@DurableFsm({ name: 'prof1' })
class ProfJob {
  perform(): undefined {
    start();
    final();
    return undefined;
  }
}

/** KIND=scoped: the same job, request-scoped (docs/scoped-providers.md): one instance per run. */
@Injectable({ scope: Scope.REQUEST })
@DurableFsm({ name: 'prof_scoped' })
class ProfScoped {
  perform(): undefined {
    start();
    final();
    return undefined;
  }
}

/** KIND=tx: the same job, transactional (docs/transactional-steps.md), writing nothing. */
@DurableFsm({ name: 'prof_tx', transactional: true })
class ProfTx {
  perform(): undefined {
    start();
    final();
    return undefined;
  }
}

/** KIND=txw: a transactional job that inserts one row, committed with its outcome. */
@DurableFsm({ name: 'prof_txw', transactional: true })
class ProfTxWrite {
  async perform(_state: unknown, ctx: TransactionalStepContext<unknown>): Promise<undefined> {
    start();
    await ctx.manager.query(`INSERT INTO prof_effects (instance_id) VALUES ($1)`, [ctx.id]);
    final();
    return undefined;
  }
}

/** KIND=jobw: a plain job that inserts the same row through the DataSource (autocommit). */
@DurableFsm({ name: 'prof_jobw' })
class ProfJobWrite {
  async perform(_state: unknown, ctx: StepContext<unknown>): Promise<undefined> {
    start();
    await dataSource.query(`INSERT INTO prof_effects (instance_id) VALUES ($1)`, [ctx.id]);
    final();
    return undefined;
  }
}

@DurableFsm({ name: 'prof3' })
class Prof3 {
  @Step() start(ctx: StepContext) {
    start();
    return next('b', ctx.state);
  }
  @Step() b(ctx: StepContext) {
    return next('c', ctx.state);
  }
  @Step() c() {
    final();
    return done({});
  }
}

/** The bench's DataSource (KIND=jobw writes through it). */
let dataSource: DataSource;

/** Client-side time of every statement, by name. */
const timings = new Map<string, { count: number; ms: number }>();
/**
 * CLAIM_RUNNABLE's own time on the server up to its write's end (its trailer's `exec_ms`), summed
 * over the claims that took rows: the rest of their round trip is the commit, the rows' transfer
 * and parsing, and the wait for the worker's event loop.
 */
const claimExec = { count: 0, roundTripMs: 0, execMs: 0 };
const original = SqlExecutor.prototype.queryResult;
SqlExecutor.prototype.queryResult = async function timed(this: SqlExecutor, ...args) {
  const t0 = performance.now();
  try {
    const result = await original.apply(this, args);
    if (args[0].name === 'claim_runnable' && result.rows.length > 1) {
      const trailer = result.rows[result.rows.length - 1] as { exec_ms?: number | string | null };
      claimExec.count += 1;
      claimExec.roundTripMs += performance.now() - t0;
      claimExec.execMs += Number(trailer.exec_ms ?? 0);
    }
    return result;
  } finally {
    const t = timings.get(args[0].name) ?? { count: 0, ms: 0 };
    t.count += 1;
    t.ms += performance.now() - t0;
    timings.set(args[0].name, t);
  }
} as typeof original;

async function profileDrain(url: string): Promise<void> {
  const poolMax = Number(
    process.env['POOL'] ?? (KIND === 'tx' || KIND === 'txw' || KIND === 'jobw' ? C + 4 : 10),
  );
  const ds = new DataSource({ type: 'postgres', url, extra: { max: poolMax } });
  dataSource = ds;
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    await ds.query(`CREATE TABLE prof_effects (instance_id bigint NOT NULL)`);
    @Module({
      imports: [GenDurableModule.forRoot({ dataSource: ds, queues: { default: C }, ...OPTS })],
      providers: [ProfJob, Prof3, ProfScoped, ProfTx, ProfTxWrite, ProfJobWrite],
    })
    class ProfModule {}
    const picks: number[] = [];
    const app = await NestFactory.createApplicationContext(ProfModule, { logger: ['error'] });
    const engine = app.get(EngineService);
    // Only pick:stop is subscribed (a diagnostics channel): with an events$ subscriber every
    // event would be built and published, which the bench's workers never do.
    subscribe('gen_durable:pick:stop', (message) => {
      const count = (message as GenDurableEvent).measurements['count'] ?? 0;
      if (count > 0) picks.push(count);
    });
    await app.init();
    const cls = {
      fsm3: Prof3,
      scoped: ProfScoped,
      tx: ProfTx,
      txw: ProfTxWrite,
      jobw: ProfJobWrite,
      job: ProfJob,
    }[KIND];
    timings.clear();
    Object.assign(claimExec, { count: 0, roundTripMs: 0, execMs: 0 });
    await engine.insertAll(
      cls,
      Array.from({ length: N }, () => ({ state: {} })),
    );
    const stopHeapProfile = await heapProfile();
    let gcMs = 0;
    let gcMajorMs = 0;
    const gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        gcMs += e.duration;
        // Node's gc entry kinds: 1 minor (scavenge), 2 major (mark-compact), 4 incremental.
        if ((e as { detail?: { kind?: number } }).detail?.kind !== 1) gcMajorMs += e.duration;
      }
    });
    gc.observe({ entryTypes: ['gc'] });
    const cpu0 = process.cpuUsage();
    const w0 = process.hrtime.bigint() / 1000n;
    await finished;
    await stopHeapProfile();
    const t1 = performance.now();
    const w1 = process.hrtime.bigint() / 1000n;
    const cpu = process.cpuUsage(cpu0);
    gc.disconnect();
    const ms = t1 - firstStart;
    const steps = KIND === 'fsm3' ? 3 * N : N;
    const out: string[] = [];
    out.push(
      `${KIND} N=${N} C=${C} OPTS=${JSON.stringify(OPTS)}: ${ms.toFixed(0)} ms, ${((steps / ms) * 1000).toFixed(0)} steps/s, worker CPU ${(((cpu.user + cpu.system) / 1000 / steps) * 1000).toFixed(1)} ms per 1 000 steps`,
    );
    const per1k = (us: number): string => ((us / 1000 / steps) * 1000).toFixed(1);
    out.push(
      `  of which user ${per1k(cpu.user)} + system ${per1k(cpu.system)}; GC pauses ${per1k(gcMs * 1000)} ms per 1 000 steps (${per1k(gcMajorMs * 1000)} not scavenges)`,
    );
    // The drain's span on the monotonic clock V8's CPU profile stamps samples with (µs).
    out.push(`window (µs, monotonic): ${w0} ${w1}`);
    const mean = (xs: number[]): string =>
      xs.length ? (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(1) : '—';
    out.push(`picks with rows: ${picks.length}, mean ${mean(picks)} rows`);
    for (const [stmt, t] of [...timings.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
      out.push(
        `  ${stmt.padEnd(24)} ${String(t.count).padStart(7)} × ${(t.ms / t.count).toFixed(2).padStart(6)} ms = ${t.ms.toFixed(0).padStart(6)} ms; ${((t.count / steps) * 1000).toFixed(0)} per 1 000 steps`,
      );
    }
    if (claimExec.count > 0) {
      const ms = (x: number): string => (x / claimExec.count).toFixed(2);
      out.push(
        `  claim_runnable with rows: ${claimExec.count} × ${ms(claimExec.roundTripMs)} ms round trip, of which ${ms(claimExec.execMs)} ms on the server to its write's end`,
      );
    }
    if (KIND === 'txw' || KIND === 'jobw') {
      // The last steps' outcomes (and, for txw, their rows) commit after they returned.
      const count = async (): Promise<number> =>
        (
          (await ds.query(`SELECT count(*)::int AS n FROM gen_durable WHERE status = 'done'`)) as [
            { n: number },
          ]
        )[0].n;
      for (let i = 0; i < 100 && (await count()) < N; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const [{ n }] = (await ds.query(`SELECT count(*)::int AS n FROM prof_effects`)) as [
        { n: number },
      ];
      out.push(`effect rows: ${n} for ${await count()} done of ${N} jobs`);
    }
    process.stdout.write(out.join('\n') + '\n');
    await app.close();
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

runScript(() => withScratchDatabase('gd_profile', ({ url }) => profileDrain(url)));
