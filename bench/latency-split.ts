/**
 * `npm run bench:latency-split` (issue 35 item 3, docs/performance.md "Insert → start, split"):
 * where an idle queue's insert → step start goes, beside the raw `SKIP LOCKED` floor in the same
 * process. Alternates ROUNDS (default 3) rounds of the two, N (default 2 000) sequential samples
 * each, as the bench's latency case does: idle workers of concurrency C (default 10), one insert
 * at a time, the next after the step started.
 * - raw: the bench's `raw` engine (bench/src/engines/raw.ts): an autocommit INSERT, then an
 *   in-process wake-up and one claim of the free slots.
 * - gen-durable: the module's defaults (`poke: 'local'`, as the bench's adapter), a one-step job.
 *   Each sample is split at the claim that returned its row (the production picker, timed by a
 *   wrapper): insert call → claim sent ("to claim": the insert's statement and commit, then the
 *   poke), the claim's round trip, and claim answered → step start (the buffer, the dispatch
 *   and the executor up to the step's first line). The insert's own answer is timed too.
 * GC pauses (perf_hooks) overlapping a sample are summed with it. Prints p50 / p90 / p99 / max
 * of each part, the parts' means over the slowest 1 % of samples, and gen-durable's statements
 * per sample by name. GAP_MS (default 0) pauses after each sample, so the previous step's
 * completion has committed before the next insert goes (an experiment, not the bench's case).
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { DataSource } from 'typeorm';

import { done, DurableFsm, EngineService, GenDurableModule, Step, type StepContext } from '../lib';
import { migrateUp } from '../lib/schema/migrator';
import { rawAdapter } from './src/engines/raw';
import { runScript, withScratchDatabase } from './scratch-database';

const N = Number(process.env['N'] ?? 2000);
const C = Number(process.env['C'] ?? 10);
const ROUNDS = Number(process.env['ROUNDS'] ?? 3);
/** A pause after each sample (ms): the previous step's completion commits before the next insert. */
const GAP_MS = Number(process.env['GAP_MS'] ?? 0);
const gap = (): Promise<void> | undefined =>
  GAP_MS > 0 ? new Promise((r) => setTimeout(r, GAP_MS)) : undefined;

/** gen-durable's statements by name over its rounds (the engine's own SqlExecutor). */
const statements = new Map<string, number>();

/** Step starts by marker, set by whichever engine runs. */
let onStart: (marker: number, at: number) => void = () => undefined;

@DurableFsm({ name: 'split-job' })
class SplitJob {
  @Step() start(ctx: StepContext<{ m: number }>) {
    onStart(ctx.state.m, performance.now());
    return done({});
  }
}

/** GC pauses seen so far: [start, end] in performance.now() time. */
const gcPauses: [number, number][] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcPauses.push([e.startTime, e.startTime + e.duration]);
}).observe({ entryTypes: ['gc'] });

function gcWithin(from: number, to: number): number {
  let ms = 0;
  for (let k = gcPauses.length - 1; k >= 0; k--) {
    const [a, b] = gcPauses[k]!;
    if (b < from) break;
    if (a < to) ms += Math.min(b, to) - Math.max(a, from);
  }
  return ms;
}

type Part = 'total' | 'insert answer' | 'to claim' | 'claim' | 'claim → start' | 'gc';
type Sample = Partial<Record<Part, number>>;

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

function report(label: string, samples: readonly Sample[]): void {
  const parts = Object.keys(samples[0] ?? {}) as Part[];
  const slow = [...samples]
    .sort((a, b) => b.total! - a.total!)
    .slice(0, Math.max(1, samples.length / 100));
  console.log(`\n${label}: ${samples.length} samples (ms)`);
  if (parts.includes('claim')) {
    const found = samples.filter((s) => !Number.isNaN(s.claim)).length;
    console.log(
      `  ${samples.length - found} written claimed by their insert (no claim statement), ${found} found by a claim`,
    );
  }
  const heads = ['p50', 'p90', 'p99', 'max', 'slowest 1 %'];
  console.log(`  ${'part'.padEnd(16)}${heads.map((h) => h.padStart(12)).join('')}`);
  for (const p of parts) {
    // The claim's parts exist only for rows a claim found: quantiles over those.
    const xs = samples.map((s) => s[p]!).filter((v) => !Number.isNaN(v));
    const slowXs = slow.map((s) => s[p]!).filter((v) => !Number.isNaN(v));
    const mean = slowXs.length > 0 ? slowXs.reduce((t, v) => t + v, 0) / slowXs.length : NaN;
    const cells = [quantile(xs, 0.5), quantile(xs, 0.9), quantile(xs, 0.99), Math.max(...xs), mean];
    const shown = cells.map((v) => (Number.isFinite(v) ? v.toFixed(2) : '—').padStart(12));
    console.log(`  ${p.padEnd(16)}${shown.join('')}`);
  }
}

async function rawRound(url: string, name: string): Promise<Sample[]> {
  const raw = await rawAdapter.create({
    pgUrl: url,
    dbName: name,
    redisUrl: undefined,
    redisPrefix: '',
    log: (m) => console.error(m),
  });
  const seen = new Map<number, (t: number) => void>();
  try {
    await raw.setup();
    await raw.start('job', C, {
      onStart: (m) => m !== undefined && seen.get(m)?.(performance.now()),
    });
    await new Promise((r) => setTimeout(r, 500));
    const out: Sample[] = [];
    for (let i = 0; i < N; i++) {
      const started = new Promise<number>((resolve) => seen.set(i, resolve));
      const t0 = performance.now();
      await raw.insertOne('job', i);
      const t1 = performance.now();
      const ts = await started;
      seen.delete(i);
      out.push({ total: ts - t0, 'insert answer': t1 - t0, gc: gcWithin(t0, ts) });
      await gap();
    }
    return out;
  } finally {
    await raw.close();
    await new DataSource({ type: 'postgres', url }).initialize().then(async (ds) => {
      await ds.query('DROP TABLE IF EXISTS jobs');
      await ds.destroy();
    });
  }
}

async function genDurableRound(ds: DataSource): Promise<Sample[]> {
  @Module({
    imports: [GenDurableModule.forRoot({ dataSource: ds, queues: { default: C }, poke: 'local' })],
    providers: [SplitJob],
  })
  class SplitModule {}
  const app = await NestFactory.createApplicationContext(SplitModule, { logger: ['error'] });
  await app.init();
  const engine = app.get(EngineService);
  const picker = engine.runtime.picker;
  const pickBatch = picker.pickBatch.bind(picker);
  const claims = new Map<string, [number, number]>();
  picker.pickBatch = async (queue, batch, worker, floor) => {
    const sent = performance.now();
    const answer = await pickBatch(queue, batch, worker, floor);
    const back = performance.now();
    for (const row of answer.rows) claims.set(row.id, [sent, back]);
    return answer;
  };
  const stopCounting = engine.runtime.sql.onStatement(({ name }) => {
    statements.set(name, (statements.get(name) ?? 0) + 1);
  });
  const seen = new Map<number, (t: number) => void>();
  onStart = (m, at) => seen.get(m)?.(at);
  try {
    await new Promise((r) => setTimeout(r, 500));
    const out: Sample[] = [];
    for (let i = 0; i < N; i++) {
      const started = new Promise<number>((resolve) => seen.set(i, resolve));
      const t0 = performance.now();
      const id = await engine.insert(SplitJob, { state: { m: i } });
      const t1 = performance.now();
      const ts = await started;
      seen.delete(i);
      const [sent, back] = claims.get(id) ?? [NaN, NaN];
      claims.delete(id);
      out.push({
        total: ts - t0,
        'insert answer': t1 - t0,
        'to claim': sent - t0,
        claim: back - sent,
        'claim → start': ts - back,
        gc: gcWithin(t0, ts),
      });
      await gap();
    }
    return out;
  } finally {
    picker.pickBatch = pickBatch;
    stopCounting();
    await app.close();
  }
}

runScript(() =>
  withScratchDatabase('gd_latency_split', async ({ url, name }) => {
    const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
    await ds.initialize();
    try {
      await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
      const raw: Sample[] = [];
      const gd: Sample[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        raw.push(...(await rawRound(url, name)));
        gd.push(...(await genDurableRound(ds)));
        console.log(`round ${r + 1} of ${ROUNDS} done`);
      }
      console.log(`\nN=${N} C=${C} ROUNDS=${ROUNDS}, ${new Date().toISOString()}`);
      report('raw (bench/src/engines/raw.ts)', raw);
      report('gen-durable (defaults, poke local)', gd);
      const ratio = (q: number) =>
        (
          quantile(
            gd.map((s) => s.total!),
            q,
          ) /
          quantile(
            raw.map((s) => s.total!),
            q,
          )
        ).toFixed(2);
      console.log(`\ngen-durable ÷ raw, insert → start: p50 ${ratio(0.5)}×, p99 ${ratio(0.99)}×`);
      const perSample = [...statements]
        .sort((a, b) => b[1] - a[1])
        .map(([n, c]) => `${n} ${(c / gd.length).toFixed(2)}`);
      console.log(`gen-durable statements per sample: ${perSample.join(', ')}`);
    } finally {
      await ds.destroy();
    }
  }),
);
