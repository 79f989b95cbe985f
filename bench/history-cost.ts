/**
 * `npm run bench:history`: the cost of each step-history level (docs/performance.md, "Step
 * history cost") in ONE process and database: N 3-step machines (next, next, done) of an FSM
 * declared with `history: <level>` are inserted with one insertAll, and a worker with
 * `queues: { default: C }` drains them, timed from the first step start to the last `done`.
 * Repeats interleave the levels (repeat k starts at the k-th level and goes round) plus
 * `off (A/A)`, the baseline a second time (the noise floor); each ratio is paired with `off`
 * in the same repeat, so a load drift of the shared machine cancels out. Rows are deleted
 * between runs (their history with them, by the foreign key's cascade).
 *
 *   N=5000 C=20 REPEATS=5 npm run bench:history
 *
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  type HistoryLevel,
  next,
  Step,
  type StepContext,
} from '../lib';
import { migrateUp } from '../lib/schema/migrator';
import { runScript, withScratchDatabase } from './scratch-database';
import { median } from './src/stats';

const N = Number(process.env['N'] ?? 5_000);
const C = Number(process.env['C'] ?? 20);
const REPEATS = Number(process.env['REPEATS'] ?? 5);

let finals = 0;
let firstStart = 0;
let allDone: () => void = () => undefined;

function fsmOf(level: HistoryLevel) {
  @DurableFsm({ name: `hist-bench-${level}`, history: level })
  class HistoryBench {
    @Step() start(ctx: StepContext) {
      if (firstStart === 0) firstStart = performance.now();
      return next('b', ctx.state);
    }
    @Step() b(ctx: StepContext) {
      return next('c', ctx.state);
    }
    @Step() c() {
      if (++finals === N) allDone();
      return done({});
    }
  }
  return HistoryBench;
}

const LEVELS: HistoryLevel[] = ['off', 'failures', 'transitions', 'full'];
const fsms = new Map(LEVELS.map((level) => [level, fsmOf(level)]));

const variants = [...LEVELS, 'off (A/A)'];

/** The repeats' drains: per variant, the rate (steps/s) and the worker CPU of each repeat. */
async function drains(
  url: string,
): Promise<{ rates: Map<string, number[]>; cpus: Map<string, number[]> }> {
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  const rates = new Map<string, number[]>(variants.map((v) => [v, []]));
  const cpus = new Map<string, number[]>(variants.map((v) => [v, []]));
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    @Module({
      imports: [GenDurableModule.forRoot({ dataSource: ds, queues: { default: C }, gc: false })],
      providers: [...fsms.values()],
    })
    class HistoryModule {}
    const app = await NestFactory.createApplicationContext(HistoryModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    for (let rep = 0; rep < REPEATS; rep++) {
      const order = variants.map((_, i) => variants[(i + rep) % variants.length]!);
      for (const v of order) {
        const level = (v === 'off (A/A)' ? 'off' : v) as HistoryLevel;
        finals = 0;
        firstStart = 0;
        const finished = new Promise<void>((resolve) => (allDone = resolve));
        const cpu0 = process.cpuUsage();
        await engine.insertAll(
          fsms.get(level)!,
          Array.from({ length: N }, () => ({ state: {} })),
        );
        await finished;
        const rate = ((3 * N) / (performance.now() - firstStart)) * 1000;
        rates.get(v)!.push(rate);
        const cpu = process.cpuUsage(cpu0);
        const cpuPer1k = ((cpu.user + cpu.system) / 1000 / (3 * N)) * 1000;
        cpus.get(v)!.push(cpuPer1k);
        const history = await ds.query(`SELECT count(*)::int AS n FROM gen_durable_history`);
        console.log(
          `repeat ${rep + 1} ${v.padEnd(11)}: ${rate.toFixed(0)} steps/s, worker CPU ${cpuPer1k.toFixed(0)} ms / 1 000 steps, ${String((history as { n: number }[])[0]!.n)} history rows`,
        );
        // Let the last flush's after-commit effects settle, then start from an empty table.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await ds.query(`DELETE FROM gen_durable`);
      }
    }
    await app.close();
  } finally {
    await ds.destroy().catch(() => undefined);
  }
  return { rates, cpus };
}

async function main(): Promise<void> {
  const { rates, cpus } = await withScratchDatabase('gd_history', ({ url }) => drains(url));
  const base = rates.get('off')!;
  console.log(`\nfsm3 drain, N=${N}, C=${C}, ${REPEATS} interleaved repeats`);
  for (const v of variants) {
    const mine = rates.get(v)!;
    const ratios = mine.map((r, i) => r / base[i]!);
    const cpu = cpus.get(v)!;
    const cpuRatios = cpu.map((c, i) => c / cpus.get('off')![i]!);
    console.log(
      `${v.padEnd(11)} worker CPU median ${median(cpu).toFixed(0)} ms / 1 000 steps; paired ÷ off: median ${median(cpuRatios).toFixed(3)} (min ${Math.min(...cpuRatios).toFixed(3)}, max ${Math.max(...cpuRatios).toFixed(3)})`,
    );
    console.log(
      `${v.padEnd(11)} median ${median(mine).toFixed(0)} steps/s; paired ÷ off: median ${median(ratios).toFixed(3)} (min ${Math.min(...ratios).toFixed(3)}, max ${Math.max(...ratios).toFixed(3)})`,
    );
  }
}

runScript(main);
