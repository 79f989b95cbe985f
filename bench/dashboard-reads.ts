/**
 * `npm run bench:dashboard-reads` (ROWS, default 1 000 000): the dashboard's reads on a table
 * of ROWS instances (70 % done, 1 % failed, 1 % awaiting a signal, 500 executing, the rest
 * runnable in three queues), each timed 20 times after 3 warm-up runs through the engine's
 * SqlExecutor (named prepared statements, generic plans after five runs), median and max
 * printed: the overview from the stats snapshot and its live fallback, the snapshot write,
 * list and count of the default views, explain of a row, limiter status. docs/performance.md
 * "Dashboard reads at 1 000 000 rows" records a run. Uses DATABASE_URL or embedded PostgreSQL.
 */
import { Pool } from 'pg';

import { SqlExecutor } from '../lib/db/sql-executor';
import { InstanceQuery } from '../lib/control/instance-query';
import { explainInstance } from '../lib/control/instance-explain';
import { readLimiterStatus } from '../lib/control/read-limiter-status';
import { readOverview } from '../lib/control/read-stats-overview';
import { StatsSnapshot } from '../lib/runtime/stats-snapshot';
import { migrateUp } from '../lib/schema/migrator';
import { Telemetry } from '../lib/telemetry/telemetry';
import { runScript, type ScratchDatabase, withScratchDatabase } from './scratch-database';

const ROWS = Number(process.env['ROWS'] ?? 1_000_000);
const RUNS = 20;

async function time(label: string, fn: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 3; i++) await fn();
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = process.hrtime.bigint();
    await fn();
    ms.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const median = ms[Math.floor(ms.length / 2)] as number;
  const max = ms[ms.length - 1] as number;
  process.stdout.write(`| ${label} | ${median.toFixed(1)} | ${max.toFixed(1)} |\n`);
}

/**
 * The dashboard benches' table (bench/dashboard-pages.ts reuses it): `rows` instances — 70 %
 * done and 1 % failed over the last two hours, 1 % awaiting a signal, 500 executing, the rest
 * runnable in three queues (q0, q1, q2) and two priorities. The caller runs VACUUM ANALYZE.
 */
export async function fillDashboardFixture(
  client: { query(text: string, params?: unknown[]): Promise<unknown> },
  rows: number,
): Promise<void> {
  const done = Math.floor(rows * 0.7);
  const failed = Math.floor(rows / 100);
  const parked = Math.floor(rows / 100);
  const executing = 500;
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, queue, updated_at)
     SELECT 'job', 'perform', 'done', 'q' || (i % 3), now() - make_interval(secs => i % 7200)
       FROM generate_series(1, $1) i`,
    [done],
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, queue, last_error, updated_at)
     SELECT 'job', 'perform', 'failed', 'q' || (i % 3), 'Error: boom', now() - make_interval(secs => i % 7200)
       FROM generate_series(1, $1) i`,
    [failed],
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, queue, awaits)
     SELECT 'flow', 'wait', 'awaiting_signal', 'q' || (i % 3), '{go}' FROM generate_series(1, $1) i`,
    [parked],
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, status, queue, locked_by, lease_expires_at)
     SELECT 'job', 'perform', 'executing', 'q' || (i % 3), 'w', now() + interval '1 hour'
       FROM generate_series(1, $1) i`,
    [executing],
  );
  await client.query(
    `INSERT INTO gen_durable (fsm, step, queue, priority, eligible_at)
     SELECT 'job', 'perform', 'q' || (i % 3), i % 2, now() - make_interval(secs => i % 600)
       FROM generate_series(1, $1) i`,
    [rows - done - failed - parked - executing],
  );
}

async function dashboardReads({ url, server, embedded }: ScratchDatabase): Promise<void> {
  const pool = new Pool({ connectionString: url, max: 4 });
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
    process.stdout.write(
      `${ROWS} rows (${server.replace(/:[^:@/]*@/, ':***@')}${embedded ? ', embedded PostgreSQL' : ''})\n\n| read | median ms | max ms |\n| --- | --- | --- |\n`,
    );
    const sql = new SqlExecutor(pool, {
      schema: 'public',
      preparedStatements: true,
      statementTimeoutMs: 60_000,
    });
    const queues = ['q0', 'q1', 'q2'];
    await time('overview, no snapshot yet (live capped counts)', () =>
      readOverview(sql, {}, queues),
    );
    const snapshot = new StatsSnapshot(
      sql,
      { interval: 15_000, retention: 86_400_000, cap: 10_000 },
      new Telemetry('bench'),
    );
    let first = true;
    await time('stats snapshot write (first run writes, later runs find the minute)', async () => {
      if (first) {
        const start = process.hrtime.bigint();
        const written = await snapshot.take();
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        process.stdout.write(
          `| stats snapshot, the write itself (${written.length} queues) | ${ms.toFixed(1)} | — |\n`,
        );
        first = false;
        return;
      }
      await snapshot.take();
    });
    await pool.query(
      `INSERT INTO gen_durable_stats (at, queue, counts)
       SELECT date_trunc('minute', now()) - make_interval(mins => m), q, '{"done": 100, "failed": 1}'
         FROM generate_series(1, 1439) m, unnest(ARRAY['q0', 'q1', 'q2']) q
       ON CONFLICT DO NOTHING`,
    );
    await time('overview from the snapshot (60-minute series)', () =>
      readOverview(sql, { minutes: 60 }, queues),
    );
    await time('overview from the snapshot (24-hour series)', () =>
      readOverview(sql, { minutes: 1440 }, queues),
    );
    const query = new InstanceQuery(sql);
    await time('list: first page, every instance', () => query.list({}, undefined));
    await time('list: first page, failed', () => query.list({ status: 'failed' }, undefined));
    await time('list: first page, runnable of queue q1', () =>
      query.list({ status: 'runnable', queue: 'q1' }, undefined),
    );
    await time('count (cap 10 000): failed', () => query.count({ status: 'failed' }, undefined));
    await time('count (cap 10 000): runnable of q1', () =>
      query.count({ status: 'runnable', queue: 'q1' }, undefined),
    );
    await time('count (cap 10 000): executing', () =>
      query.count({ status: 'executing' }, undefined),
    );
    const { rows } = await pool.query<{ id: string }>(
      `SELECT max(id)::text AS id FROM gen_durable WHERE status = 'runnable'`,
    );
    await time('explain of a due runnable row', () => explainInstance(sql, { id: rows[0]!.id }));
    await time('limiter status', () => readLimiterStatus(sql, 'postgres'));
  } finally {
    await pool.end();
  }
}

if (require.main === module) {
  runScript(() => withScratchDatabase('gd_dashboard', dashboardReads));
}
