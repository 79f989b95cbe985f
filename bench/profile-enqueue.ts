/**
 * `npm run profile:enqueue`: the bench's enqueue case in this process — N awaited `insert()`
 * calls from C concurrent callers on a node with no local queue (the module's defaults, group
 * commit on) — with every statement timed from the client (count, total and mean ms by
 * statement name), the rows per statement, and the process's CPU per 1 000 inserts. Add
 * `node --cpu-prof` for a V8 CPU profile of the same run (docs/performance.md).
 *
 *   N=50000 C=50 npm run profile:enqueue
 *
 * COMPARE=1 adds the two batch statements side by side (compareStatements); EXPLAIN=1 the plan
 * of one INSERT of C rows as the lane wrote it. Uses DATABASE_URL (a server where it may CREATE
 * DATABASE) or the embedded PostgreSQL.
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { DurableFsm, EngineService, GenDurableModule } from '../lib';
import { withArrayLiterals } from '../lib/db/array-literal';
import { SqlExecutor } from '../lib/db/sql-executor';
import { migrateUp } from '../lib/schema/migrator';
import { INSERT_INSTANCES, INSERT_UNKEYED_INSTANCES } from '../lib/sql/insert.sql';
import { renderStatement } from '../lib/sql/statement';
import { runScript, withScratchDatabase } from './scratch-database';

const N = Number(process.env['N'] ?? 50_000);
const C = Number(process.env['C'] ?? 50);
const WARMUP = Number(process.env['WARMUP'] ?? 5_000);

@DurableFsm({ name: 'prof_enqueue' })
class ProfEnqueueJob {
  perform(): undefined {
    return undefined;
  }
}

/** Client-side time and rows of every statement, by name. */
const timings = new Map<string, { count: number; ms: number; rows: number }>();
const original = SqlExecutor.prototype.queryResult;
SqlExecutor.prototype.queryResult = async function timed(this: SqlExecutor, ...args) {
  const t0 = performance.now();
  let rows = 0;
  try {
    const result = await original.apply(this, args);
    rows = result.rows.length;
    return result;
  } finally {
    const t = timings.get(args[0].name) ?? { count: 0, ms: 0, rows: 0 };
    t.count += 1;
    t.ms += performance.now() - t0;
    t.rows += rows;
    timings.set(args[0].name, t);
  }
} as typeof original;

async function callers(engine: EngineService, n: number): Promise<void> {
  let issued = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (issued < n) {
        issued++;
        await engine.insert(ProfEnqueueJob, { state: {} });
      }
    }),
  );
}

/**
 * COMPARE=1: INSERT_INSTANCES and INSERT_UNKEYED_INSTANCES on the same C unkeyed entries, one
 * after the other on one connection, 300 calls each, five rounds alternating: client-side ms
 * per call (parse, bind, execute, commit), the figure behind docs/performance.md's
 * "Group-commit inserts".
 */
async function compareStatements(url: string): Promise<string[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const rows = Array.from({ length: C }, () => ({
      fsm: 'prof_enqueue',
      fsmVersion: 1,
      step: 'perform',
      stateText: '{}',
      queue: 'default',
      priority: 0,
      at: null,
      delayMs: 0,
      correlationKey: null,
      scope: 'runnable,executing,awaiting_signal,awaiting_children',
      concurrencyKey: null,
      rateLimit: null,
      weight: 1,
    }));
    const ms = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      for (const statement of [INSERT_INSTANCES, INSERT_UNKEYED_INSTANCES]) {
        const config = {
          name: statement.name,
          text: renderStatement(statement, 'public'),
          values: withArrayLiterals(statement.params({ rows })) as unknown[],
        };
        const t0 = performance.now();
        for (let i = 0; i < 300; i++) await client.query(config);
        const list = ms.get(statement.name) ?? [];
        list.push((performance.now() - t0) / 300);
        ms.set(statement.name, list);
      }
    }
    return [...ms].map(
      ([name, list]) =>
        `  ${name.padEnd(26)} ${C} rows: ${list.map((m) => m.toFixed(3)).join(' ')} ms per call (5 rounds)`,
    );
  } finally {
    await client.end();
  }
}

async function profileEnqueue(url: string): Promise<void> {
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    @Module({
      imports: [GenDurableModule.forRoot({ dataSource: ds, queues: {} })],
      providers: [ProfEnqueueJob],
    })
    class ProfModule {}
    const app = await NestFactory.createApplicationContext(ProfModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    await callers(engine, WARMUP);
    timings.clear();
    const cpu0 = process.cpuUsage();
    const w0 = process.hrtime.bigint() / 1000n;
    const t0 = performance.now();
    await callers(engine, N);
    const ms = performance.now() - t0;
    const w1 = process.hrtime.bigint() / 1000n;
    const cpu = process.cpuUsage(cpu0);
    const out: string[] = [];
    out.push(
      `enqueue N=${N} C=${C}: ${ms.toFixed(0)} ms, ${((N / ms) * 1000).toFixed(0)} inserts/s, process CPU ${(((cpu.user + cpu.system) / 1000 / N) * 1000).toFixed(1)} ms per 1 000 inserts`,
    );
    out.push(`window (µs, monotonic, as a --cpu-prof profile's timestamps): ${w0} ${w1}`);
    for (const [stmt, t] of [...timings.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
      out.push(
        `  ${stmt.padEnd(24)} ${String(t.count).padStart(7)} × ${(t.ms / t.count).toFixed(2).padStart(6)} ms = ${t.ms.toFixed(0).padStart(6)} ms; ${(t.rows / t.count).toFixed(1)} rows each`,
      );
    }
    // Each pooled connection's prepared insert statements: generic or custom plans (all 10 at once).
    const plans = (await Promise.all(
      Array.from({ length: 10 }, () =>
        ds.query(
          `SELECT name, generic_plans, custom_plans, pg_backend_pid() AS pid FROM pg_prepared_statements WHERE name LIKE '%insert%'`,
        ),
      ),
    )) as Array<Array<{ name: string; generic_plans: number; custom_plans: number; pid: number }>>;
    for (const r of plans.flat()) {
      out.push(
        `  backend ${r.pid}: ${r.name} generic ${r.generic_plans}, custom ${r.custom_plans}`,
      );
    }
    if (process.env['COMPARE'] === '1') out.push(...(await compareStatements(url)));
    if (process.env['EXPLAIN'] === '1') {
      // One more batch of C, its batch statement captured and explained in a rolled-back transaction.
      let captured: { text: string; values: unknown[] } | undefined;
      SqlExecutor.prototype.queryResult = async function capture(this: SqlExecutor, ...args) {
        if (args[0].name.startsWith('insert_') && args[0].name.endsWith('instances') && !captured) {
          captured = { text: renderStatement(args[0], this.schema), values: [...(args[1] ?? [])] };
        }
        return original.apply(this, args);
      } as typeof original;
      await callers(engine, C * 2);
      if (captured) {
        const qr = ds.createQueryRunner();
        await qr.startTransaction();
        const plan = (await qr.query(
          `EXPLAIN (ANALYZE, BUFFERS, WAL) ${captured.text}`,
          captured.values,
        )) as Array<{ 'QUERY PLAN': string }>;
        await qr.rollbackTransaction();
        await qr.release();
        out.push(...plan.map((r) => r['QUERY PLAN']));
      }
    }
    process.stdout.write(out.join('\n') + '\n');
    await app.close();
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

runScript(() => withScratchDatabase('gd_profile_enqueue', ({ url }) => profileEnqueue(url)));
