/**
 * `npm run bench:fair-claim`: the cost of the fair claim (CLAIM_FAIR, docs/many-tenants.md "Fair
 * claims by key") with a small and a large keyed backlog: SMALL_ROWS runnable rows behind
 * SMALL_KEYS fairness keys (default 10 000 behind 100), then LARGE_ROWS behind LARGE_KEYS
 * (default 1 000 000 behind 10 000), each on a fresh queue of the same database. For each: the
 * plan (`EXPLAIN (ANALYZE, BUFFERS)`, one claim of BATCH in a rolled-back transaction), then
 * CLAIMS committed claims of BATCH after WARMUP warm-up claims, timed client side (median, p95,
 * shared buffers hit + read per claim from the plan). The rows are inserted through the
 * production column list by `INSERT … SELECT` (the head trigger creates the heads), keys
 * interleaved so every key has the same backlog, then ANALYZE.
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 */
import { Client } from 'pg';

import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_FAIR, CLAIM_RUNNABLE } from '../lib/sql/claim.sql';
import { renderStatement, type StatementRunner } from '../lib/sql/statement';
import { runScript, withScratchDatabase } from './scratch-database';

const SMALL_ROWS = Number(process.env['SMALL_ROWS'] ?? 10_000);
const SMALL_KEYS = Number(process.env['SMALL_KEYS'] ?? 100);
const LARGE_ROWS = Number(process.env['LARGE_ROWS'] ?? 1_000_000);
const LARGE_KEYS = Number(process.env['LARGE_KEYS'] ?? 10_000);
const BATCH = Number(process.env['BATCH'] ?? 20);
const CLAIMS = Number(process.env['CLAIMS'] ?? 200);
const WARMUP = 10;

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

async function measure(
  client: Client,
  queue: string,
  rows: number,
  keys: number,
): Promise<{ median: number; p95: number; got: number }> {
  const started = Date.now();
  await client.query(
    `INSERT INTO gen_durable (fsm, step, queue, fairness_key, eligible_at)
     SELECT 'job', 'perform', $1, 'tenant-' || (i % $3), now() - interval '1 hour' + i * interval '1 microsecond'
       FROM generate_series(1, $2) i`,
    [queue, rows, keys],
  );
  await client.query('ANALYZE gen_durable');
  await client.query('ANALYZE gen_durable_fair_keys');
  process.stdout.write(
    `\n## ${queue}: ${rows} runnable rows behind ${keys} keys (inserted in ${((Date.now() - started) / 1000).toFixed(1)} s)\n`,
  );
  const input = { queue, limit: BATCH, worker: 'bench', leaseMs: 60_000, gates: [] };
  await client.query('BEGIN');
  try {
    const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING ON) ${renderStatement(CLAIM_FAIR, 'public')}`,
      CLAIM_FAIR.params(input),
    );
    process.stdout.write(`${plan.map((r) => r['QUERY PLAN']).join('\n')}\n`);
  } finally {
    await client.query('ROLLBACK');
  }
  const runner: StatementRunner = {
    queryResult: (statement, values) =>
      client.query(renderStatement(statement, 'public'), values as unknown[]),
  };
  const times: number[] = [];
  let got = 0;
  for (let i = 0; i < WARMUP + CLAIMS; i++) {
    const t0 = process.hrtime.bigint();
    const batch = await CLAIM_FAIR.run(runner, input);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (i >= WARMUP) {
      times.push(ms);
      got += batch.rows.length;
    }
  }
  times.sort((a, b) => a - b);
  await client.query('BEGIN');
  try {
    const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${renderStatement(CLAIM_FAIR, 'public')}`,
      CLAIM_FAIR.params(input),
    );
    process.stdout.write(
      `\n-- after the timed claims (timing off):\n${plan.map((r) => r['QUERY PLAN']).join('\n')}\n`,
    );
  } finally {
    await client.query('ROLLBACK');
  }
  return { median: quantile(times, 0.5), p95: quantile(times, 0.95), got };
}

async function fairClaimCost(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    await client.query('SET jit = off');
    const small = await measure(client, 'small', SMALL_ROWS, SMALL_KEYS);
    const large = await measure(client, 'large', LARGE_ROWS, LARGE_KEYS);
    // The plain claim on the small backlog's queue shape, for scale (no keys).
    await client.query(
      `INSERT INTO gen_durable (fsm, step, queue) SELECT 'job', 'perform', 'plain' FROM generate_series(1, $1)`,
      [SMALL_ROWS],
    );
    await client.query('ANALYZE gen_durable');
    const runner: StatementRunner = {
      queryResult: (statement, values) =>
        client.query(renderStatement(statement, 'public'), values as unknown[]),
    };
    const plainTimes: number[] = [];
    const plain = { queue: 'plain', limit: BATCH, worker: 'bench', leaseMs: 60_000, gates: [] };
    for (let i = 0; i < WARMUP + CLAIMS; i++) {
      const t0 = process.hrtime.bigint();
      await CLAIM_RUNNABLE.run(runner, plain);
      if (i >= WARMUP) plainTimes.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    plainTimes.sort((a, b) => a - b);
    const f = (n: number): string => n.toFixed(2);
    process.stdout.write(
      `\n| backlog | claims of ${BATCH} | rows claimed | median ms | p95 ms |\n|---|---|---|---|---|\n` +
        `| ${SMALL_ROWS} rows / ${SMALL_KEYS} keys (CLAIM_FAIR) | ${CLAIMS} | ${small.got} | ${f(small.median)} | ${f(small.p95)} |\n` +
        `| ${LARGE_ROWS} rows / ${LARGE_KEYS} keys (CLAIM_FAIR) | ${CLAIMS} | ${large.got} | ${f(large.median)} | ${f(large.p95)} |\n` +
        `| ${SMALL_ROWS} rows, no keys (CLAIM_RUNNABLE) | ${CLAIMS} | — | ${f(quantile(plainTimes, 0.5))} | ${f(quantile(plainTimes, 0.95))} |\n` +
        `\nlarge / small median: ${(large.median / small.median).toFixed(2)}×\n`,
    );
  } finally {
    await client.end();
  }
}

runScript(() => withScratchDatabase('gd_fair', ({ url }) => fairClaimCost(url)));
