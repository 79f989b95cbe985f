/**
 * `npm run bench:known-limits`: known limits #1, #4 and #5 of docs/performance.md ("Known
 * limits", docs/design.md §24.3) measured on a plain queue and on a fair queue (a fairness key
 * per tenant, docs/many-tenants.md), in one database, one run:
 *
 * 1. **Hot K = 1 key with a backlog** (statement level): HOT rows (default 10 000) of one
 *    `concurrencyKey` whose key is busy (one of them executing) sit ahead of OTHER rows (default
 *    5 000, no K = 1 key). CLAIMS claims of BATCH (default 100 of 20) by the production
 *    statement (CLAIM_RUNNABLE on the plain queue, CLAIM_FAIR on the fair one, where the hot rows
 *    are one tenant's and the others spread over 100 tenants), against the same queue without
 *    the hot rows: shared buffers (hit + read) and execution ms per claim from
 *    pg_stat_statements (deltas of this database's entries), rows claimed per claim.
 * 2. **Throttled rows occupy the window** (engine, queue concurrency 20, prefetch default):
 *    THROTTLED rows (default 1 000) whose rate limit has no token (`partner`, 1 per hour, spent
 *    by the first) inserted ahead of UNTHROTTLED rows (default 2 000) of an FSM that ends at
 *    once; the unthrottled rows finished within PHASE_S seconds (default 20) and their rate,
 *    against the same rows without the throttled ones; picks and rows refused by admission
 *    (the engine's `pick:stop` and `rate_limit:throttled` events). Fair queue: the throttled
 *    rows are tenant `T`'s, the unthrottled ones spread over 10 tenants.
 * 3. **Saturated limits make empty picks write** (engine): only SATURATED rows (default 200,
 *    over 10 tenants on the fair queue) whose rate limit has no token, for WINDOW_S seconds
 *    (default 30): picks (events), rows refused per pick, and rows of gen_durable updated per
 *    pick (`n_tup_upd` of pg_stat_user_tables: each refused row is claimed and released).
 *
 * Uses DATABASE_URL (a server where it may CREATE DATABASE, with pg_stat_statements in
 * shared_preload_libraries) or the embedded PostgreSQL (then part 1 and 3's statement counts
 * are skipped when the extension is missing).
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { done, DurableFsm, EngineService, GenDurableModule, Step } from '../lib';
import { migrateUp } from '../lib/schema/migrator';
import { CLAIM_FAIR, CLAIM_RUNNABLE } from '../lib/sql/claim.sql';
import { renderStatement, type StatementRunner } from '../lib/sql/statement';
import { runScript, withScratchDatabase } from './scratch-database';

const HOT = Number(process.env['HOT'] ?? 10_000);
const OTHER = Number(process.env['OTHER'] ?? 5_000);
const BATCH = Number(process.env['BATCH'] ?? 20);
const CLAIMS = Number(process.env['CLAIMS'] ?? 100);
const THROTTLED = Number(process.env['THROTTLED'] ?? 1_000);
const UNTHROTTLED = Number(process.env['UNTHROTTLED'] ?? 2_000);
const PHASE_S = Number(process.env['PHASE_S'] ?? 20);
const SATURATED = Number(process.env['SATURATED'] ?? 200);
const WINDOW_S = Number(process.env['WINDOW_S'] ?? 30);
const C = 20;

let finished = 0;

/** Per queue, from the engine's events: picks, rows they started, rows refused by admission. */
interface PickCounters {
  picks: number;
  started: number;
  refused: number;
}
const picks = new Map<string, PickCounters>();
function countersOf(queue: string): PickCounters {
  let c = picks.get(queue);
  if (!c) picks.set(queue, (c = { picks: 0, started: 0, refused: 0 }));
  return c;
}
function snapshot(queue: string): PickCounters {
  return { ...countersOf(queue) };
}
function since(queue: string, before: PickCounters): PickCounters {
  const now = countersOf(queue);
  return {
    picks: now.picks - before.picks,
    started: now.started - before.started,
    refused: now.refused - before.refused,
  };
}

@DurableFsm({ name: 'kl-free', queue: 'kl-idle' })
class FreeJob {
  @Step() start() {
    finished++;
    return done({});
  }
}

@DurableFsm({ name: 'kl-throttled', queue: 'kl-idle' })
class ThrottledJob {
  @Step() start() {
    return done({});
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** This database's pg_stat_statements entries whose text contains `marker`: summed counters. */
interface StatementCounters {
  calls: number;
  rows: number;
  blocks: number;
  ms: number;
}

async function counters(client: Client, marker: string): Promise<StatementCounters> {
  const { rows } = await client.query<{ calls: string; rows: string; blocks: string; ms: number }>(
    `SELECT coalesce(sum(s.calls), 0) AS calls, coalesce(sum(s.rows), 0) AS rows,
            coalesce(sum(s.shared_blks_hit + s.shared_blks_read), 0) AS blocks,
            coalesce(sum(s.total_exec_time), 0)::float8 AS ms
       FROM pg_stat_statements s
      WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND strpos(s.query, $1) > 0`,
    [marker],
  );
  const r = rows[0]!;
  return { calls: Number(r.calls), rows: Number(r.rows), blocks: Number(r.blocks), ms: r.ms };
}

function minus(a: StatementCounters, b: StatementCounters): StatementCounters {
  return {
    calls: a.calls - b.calls,
    rows: a.rows - b.rows,
    blocks: a.blocks - b.blocks,
    ms: a.ms - b.ms,
  };
}

// Markers: a piece of text only that statement holds, and which pg_stat_statements' normalization
// (constants become $n) leaves as written. Part 1 only: its statements run on this client.
const CLAIM_FAIR_MARK = 'FOR NO KEY UPDATE OF f SKIP LOCKED';
const CLAIM_PLAIN_MARK = 'AND (g.priority, g.eligible_at) >= ($6::smallint, $7::timestamptz)';

/** Part 1: one queue's claims, by the statement the picker would use. */
async function hotKeyClaims(
  client: Client,
  queue: string,
  fair: boolean,
  hot: number,
): Promise<{ perClaim: StatementCounters; got: number }> {
  const tenant = (expr: string): string => (fair ? expr : 'NULL');
  if (hot > 0) {
    await client.query(
      `INSERT INTO gen_durable (fsm, step, queue, fairness_key, concurrency_key, eligible_at)
       SELECT 'job', 'perform', $1, ${tenant("'tenant-hot'")}, $1 || '-hot',
              now() - interval '2 hours' + i * interval '1 microsecond'
         FROM generate_series(1, $2) i`,
      [queue, hot],
    );
    // The key's first row is executing: the K = 1 key is busy, its other rows wait.
    await client.query(
      `UPDATE gen_durable SET status = 'executing', locked_by = 'other-node',
              lease_expires_at = now() + interval '1 hour'
        WHERE id = (SELECT min(id) FROM gen_durable WHERE queue = $1)`,
      [queue],
    );
  }
  await client.query(
    `INSERT INTO gen_durable (fsm, step, queue, fairness_key, eligible_at)
     SELECT 'job', 'perform', $1, ${tenant("'tenant-' || (i % 100)")},
            now() - interval '1 hour' + i * interval '1 microsecond'
       FROM generate_series(1, $2) i`,
    [queue, OTHER],
  );
  await client.query('ANALYZE gen_durable');
  await client.query('ANALYZE gen_durable_fair_keys');
  const runner: StatementRunner = {
    queryResult: (statement, values) =>
      client.query(renderStatement(statement, 'public'), values as unknown[]),
  };
  const input = { queue, limit: BATCH, worker: 'bench', leaseMs: 3_600_000, gates: [] };
  const statement = fair ? CLAIM_FAIR : CLAIM_RUNNABLE;
  const mark = fair ? CLAIM_FAIR_MARK : CLAIM_PLAIN_MARK;
  // Warm-up: one claim (the fair claim's first pass also moves the heads into round order).
  await statement.run(runner, input);
  const before = await counters(client, mark);
  let got = 0;
  for (let i = 0; i < CLAIMS; i++) got += (await statement.run(runner, input)).rows.length;
  const delta = minus(await counters(client, mark), before);
  return {
    perClaim: {
      calls: delta.calls,
      rows: delta.rows / Math.max(1, delta.calls),
      blocks: delta.blocks / Math.max(1, delta.calls),
      ms: delta.ms / Math.max(1, delta.calls),
    },
    got: got / CLAIMS,
  };
}

async function knownLimits(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  const ds = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
  const out: string[] = [];
  const say = (line: string): void => {
    out.push(line);
    process.stdout.write(`${line}\n`);
  };
  try {
    await migrateUp({ query: (text, params) => client.query(text, params), inTransaction: false });
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SET jit = off');

    // 1. Hot K = 1 key ahead of other work.
    say(
      `\n### #1 hot K = 1 key: ${HOT} waiting rows of one busy key ahead of ${OTHER} others; ${CLAIMS} claims of ${BATCH}\n`,
    );
    say(
      '| queue | hot rows ahead | rows claimed / claim | buffers / claim | ms / claim (server) |',
    );
    say('|---|---|---|---|---|');
    for (const [queue, fair, hot] of [
      ['k1-plain-base', false, 0],
      ['k1-plain-hot', false, HOT],
      ['k1-fair-base', true, 0],
      ['k1-fair-hot', true, HOT],
    ] as const) {
      const r = await hotKeyClaims(client, queue, fair, hot);
      say(
        `| ${fair ? 'fair (CLAIM_FAIR)' : 'plain (CLAIM_RUNNABLE)'} | ${hot} | ${r.got.toFixed(1)} | ${r.perClaim.blocks.toFixed(0)} | ${r.perClaim.ms.toFixed(2)} |`,
      );
    }

    // 2 and 3 run on an engine.
    await ds.initialize();
    const queues = [
      'thr-plain-base',
      'thr-plain',
      'thr-fair-base',
      'thr-fair',
      'sat-plain',
      'sat-fair',
    ];
    @Module({
      imports: [
        GenDurableModule.forRoot({
          dataSource: ds,
          queues: Object.fromEntries(queues.map((q) => [q, C])),
          rateLimits: { partner: { allowed: 1, period: [1, 'hour'] } },
          gc: false,
        }),
      ],
      providers: [FreeJob, ThrottledJob],
    })
    class LimitsModule {}
    const app = await NestFactory.createApplicationContext(LimitsModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    engine.events$.subscribe((e) => {
      const queue = (e.metadata as { queue?: string }).queue;
      if (queue === undefined) return;
      const m = e.measurements as Record<string, number>;
      if (e.event === 'pick:stop') {
        countersOf(queue).picks += 1;
        countersOf(queue).started += m['count'] ?? 0;
      } else if (e.event === 'rate_limit:throttled') {
        countersOf(queue).refused += (m['wanted'] ?? 0) - (m['granted'] ?? 0);
      }
    });
    // The bucket's only token is spent here, so every later throttled row is refused.
    await engine.insert(ThrottledJob, { queue: 'thr-plain-base', rateLimit: 'partner' });
    await sleep(1000);

    say(
      `\n### #4 throttled rows ahead: ${THROTTLED} rows of an empty rate limit, then ${UNTHROTTLED} free rows; queue concurrency ${C}, at most ${PHASE_S} s\n`,
    );
    say(
      '| queue | throttled rows ahead | free rows finished | seconds | free rows / s | picks | rows refused |',
    );
    say('|---|---|---|---|---|---|---|');
    for (const [queue, fair, throttled] of [
      ['thr-plain-base', false, 0],
      ['thr-plain', false, THROTTLED],
      ['thr-fair-base', true, 0],
      ['thr-fair', true, THROTTLED],
    ] as const) {
      if (throttled > 0) {
        await engine.insertAll(
          ThrottledJob,
          Array.from({ length: throttled }, () => ({
            queue,
            rateLimit: 'partner',
            ...(fair && { fairnessKey: 'T' }),
          })),
        );
      }
      const before = snapshot(queue);
      finished = 0;
      const t0 = Date.now();
      await engine.insertAll(
        FreeJob,
        Array.from({ length: UNTHROTTLED }, (_, i) => ({
          queue,
          ...(fair && { fairnessKey: `tenant-${i % 10}` }),
        })),
      );
      while (finished < UNTHROTTLED && Date.now() - t0 < PHASE_S * 1000) await sleep(20);
      const seconds = (Date.now() - t0) / 1000;
      const got = finished;
      const c = since(queue, before);
      say(
        `| ${fair ? 'fair' : 'plain'} | ${throttled} | ${got} of ${UNTHROTTLED} | ${seconds.toFixed(1)} | ${(got / seconds).toFixed(0)} | ${c.picks} | ${c.refused} |`,
      );
      // Out of the way of the next phases (their claims are counted by statement).
      await client.query(`DELETE FROM gen_durable WHERE queue = $1 AND status = 'runnable'`, [
        queue,
      ]);
      await sleep(500);
    }

    say(`\n### #5 saturated limit: only ${SATURATED} rows of an empty rate limit, ${WINDOW_S} s\n`);
    say(
      '| queue | picks | picks / s | rows refused / pick | rows started / pick | gen_durable rows updated / pick |',
    );
    say('|---|---|---|---|---|---|');
    for (const [queue, fair] of [
      ['sat-plain', false],
      ['sat-fair', true],
    ] as const) {
      await engine.insertAll(
        ThrottledJob,
        Array.from({ length: SATURATED }, (_, i) => ({
          queue,
          rateLimit: 'partner',
          ...(fair && { fairnessKey: `tenant-${i % 10}` }),
        })),
      );
      await sleep(2000); // the first claims (the fair switch) and pgstat's 1 s flush
      const upd = async (): Promise<number> =>
        Number(
          (
            await client.query<{ n: string }>(
              `SELECT n_tup_upd AS n FROM pg_stat_user_tables WHERE relname = 'gen_durable'`,
            )
          ).rows[0]!.n,
        );
      const before = snapshot(queue);
      const upd0 = await upd();
      await sleep(WINDOW_S * 1000);
      const c = since(queue, before);
      await sleep(1500); // pgstat flushes a backend's counters at most once a second
      const upd1 = await upd();
      const per = (n: number): string => (n / Math.max(1, c.picks)).toFixed(1);
      say(
        `| ${fair ? 'fair' : 'plain'} | ${c.picks} | ${(c.picks / WINDOW_S).toFixed(1)} | ${per(c.refused)} | ${per(c.started)} | ${per(upd1 - upd0)} |`,
      );
      await client.query(`DELETE FROM gen_durable WHERE queue = $1 AND status = 'runnable'`, [
        queue,
      ]);
      await sleep(500);
    }
    await app.close();
  } finally {
    await client.end().catch(() => undefined);
    await ds.destroy().catch(() => undefined);
  }
}

runScript(() => withScratchDatabase('gd_limits', ({ url }) => knownLimits(url)));
