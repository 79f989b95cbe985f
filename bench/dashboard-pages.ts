/**
 * `node -r ./test/support/ts-register.cjs bench/dashboard-pages.ts` (ROWS, default 1 000 000):
 * the dashboard's overview and instances pages, HTML and their JSON twins, as full HTTP
 * requests through a Nest app (Express) with `GenDurableDashboardModule` mounted at /durable,
 * on bench/dashboard-reads.ts's table (`fillDashboardFixture`). Each page is requested RUNS times
 * (default 30) after 3 warm-ups, one at a time over a keep-alive connection on 127.0.0.1, and
 * the wall-clock time from request to the last byte is printed as median / p95 / max: server
 * time plus a loopback round trip. The overview is timed twice: before any stats snapshot is
 * stored (its capped live fallback) and after one is written with 60 minutes of series. The
 * engine runs no worker and no maintenance (reaper, GC, stats, schedules off), so the table
 * stays as filled. Load averages are printed at the start and the end: the numbers mean little
 * without them on a shared machine. docs/performance.md "Dashboard reads at 1 000 000 rows"
 * records a run. Uses DATABASE_URL or embedded PostgreSQL.
 */
import 'reflect-metadata';

import { loadavg } from 'node:os';

import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import { EngineService, GenDurableModule } from '../lib';
import { GenDurableDashboardModule } from '../lib/dashboard';
import { StatsSnapshot } from '../lib/runtime/stats-snapshot';
import { migrateUp } from '../lib/schema/migrator';
import { Telemetry } from '../lib/telemetry/telemetry';
import { fillDashboardFixture } from './dashboard-reads';
import { runScript, type ScratchDatabase, withScratchDatabase } from './scratch-database';

const ROWS = Number(process.env['ROWS'] ?? 1_000_000);
const RUNS = Number(process.env['RUNS'] ?? 30);

const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function time(base: string, label: string, path: string, json: boolean): Promise<void> {
  const once = async (): Promise<number> => {
    const start = process.hrtime.bigint();
    const res = await fetch(`${base}${path}`);
    const body = await res.text();
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${body.slice(0, 300)}`);
    return ms;
  };
  for (let i = 0; i < 3; i++) await once();
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) ms.push(await once());
  ms.sort((a, b) => a - b);
  const at = (q: number): string =>
    (ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)] as number).toFixed(1);
  process.stdout.write(
    `| ${label} | ${json ? 'JSON' : 'HTML'} | \`${path}\` | ${at(0.5)} | ${at(0.95)} | ${at(1)} |\n`,
  );
}

async function bootApp(url: string): Promise<{ app: INestApplication; dataSource: DataSource }> {
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  await dataSource.initialize();
  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        queues: {},
        reaper: false,
        gc: false,
        stats: false,
        schedules: false,
      }),
      GenDurableDashboardModule.register({ path: 'durable', access: () => 'all' }),
    ],
  })
  class BenchHost {}
  const app = await NestFactory.create(BenchHost, { logger: false });
  await app.listen(0, '127.0.0.1');
  return { app, dataSource };
}

async function dashboardPages({ url, server, embedded }: ScratchDatabase): Promise<void> {
  const pool = new Pool({ connectionString: url, max: 2 });
  let host: { app: INestApplication; dataSource: DataSource } | undefined;
  try {
    const client = await pool.connect();
    try {
      await migrateUp({
        query: (text, params) => client.query(text, params),
        inTransaction: false,
      });
      await fillDashboardFixture(client, ROWS);
      await client.query('VACUUM ANALYZE gen_durable');
    } finally {
      client.release();
    }
    host = await bootApp(url);
    const base = `${(await host.app.getUrl()).replace('[::1]', '127.0.0.1')}/durable`;
    process.stdout.write(
      `${ROWS} rows, ${RUNS} requests per page after 3 warm-ups (${server.replace(/:[^:@/]*@/, ':***@')}${embedded ? ', embedded PostgreSQL' : ''})\n` +
        `load average at start: ${load()}\n\n` +
        '| page | answer | path | median ms | p95 ms | max ms |\n| --- | --- | --- | --- | --- | --- |\n',
    );
    await time(base, 'overview, no snapshot yet (capped live counts)', '', false);
    await time(base, 'overview, no snapshot yet (capped live counts)', '/api/overview', true);
    const sql = host.app.get(EngineService).runtime.sql;
    await new StatsSnapshot(
      sql,
      { interval: 60_000, retention: 86_400_000, cap: 10_000 },
      new Telemetry('bench'),
    ).take();
    await pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts)
       SELECT date_trunc('minute', now()) - make_interval(mins => m), q, '{"done": 100, "failed": 1}'
         FROM generate_series(1, 60) m, unnest(ARRAY['q0', 'q1', 'q2']) q
       ON CONFLICT DO NOTHING`,
    );
    await time(base, 'overview from the snapshot', '', false);
    await time(base, 'overview from the snapshot', '/api/overview', true);
    const lists: [string, string][] = [
      ['instances, no filter', ''],
      ['instances, failed', '?status=failed'],
      ['instances, runnable of queue q1', '?queue=q1&status=runnable'],
      ['instances, done of fsm job', '?fsm=job&status=done'],
      ['instances, failed whose error contains "boom"', '?status=failed&errorContains=boom'],
    ];
    for (const [label, query] of lists) {
      await time(base, label, `/instances${query}`, false);
      await time(base, label, `/api/instances${query}`, true);
    }
    process.stdout.write(`\nload average at the end: ${load()}\n`);
  } finally {
    // The helper's DROP … WITH (FORCE), once this returns, ends a pooled connection that
    // outlived the app's close (an idle pg client emits 57P01 'terminating connection due to
    // administrator command'): harmless once the numbers are printed, so it does not fail the run.
    process.on('uncaughtException', (err: Error & { code?: string }) => {
      if (err.code !== '57P01') throw err;
    });
    await host?.app.close();
    await host?.dataSource.destroy();
    await pool.end();
  }
}

runScript(() => withScratchDatabase('gd_dashboard_pages', dashboardPages));
