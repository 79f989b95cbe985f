/**
 * `npm run bench:sequences`: strict order per key under failures, retries and worker SIGKILLs
 * (docs/sequences.md, docs/performance.md "Sequences"). KEYS sequence keys with PER_KEY
 * instances each are inserted round by round (every key's first instance, then every key's
 * second, …) with insertAll by this process, whose engine serves no queue. WORKERS child
 * processes (this script with ROLE=worker) drain them, each an engine with
 * `queues: { default: C }`; during the drain this process SIGKILLs one worker every KILL_EVERY_S
 * seconds, KILLS times, and starts a new one in its place: the killed worker's claims (running
 * steps, prefetched rows, outcomes not yet committed) come back through the reaper once their
 * lease (LEASE_MS) expires. FAIL of the instances (a hash of the id) throw in their first runs
 * (the job retry rule retries them after a backoff), so the head of their key waits while the
 * rest of its key is due. Each step run first writes
 * its start to `seq_starts` (clock_timestamp(), before any other work) and sleeps STEP_MS.
 *
 * The order is checked from the database once every instance is done: per key, in id order,
 * no run of an instance (seq_starts, every attempt, including attempts a SIGKILL cut short)
 * started before the older instance's `done` outcome was written (gen_durable_history_all,
 * `kind = 'done'`, whose `at` is its flush transaction's start, before its commit), and the
 * committed outcomes of the history are in the same order. Prints the violations (0 expected).
 *
 *   KEYS=10000 PER_KEY=3 C=20 FAIL=0.05 WORKERS=2 KILLS=5 npm run bench:sequences
 *
 * WORKERS=0 drains in this process instead (no kill). Uses DATABASE_URL (a server where it may
 * CREATE DATABASE) or the embedded PostgreSQL.
 */
import 'reflect-metadata';

import { fork, type ChildProcess } from 'node:child_process';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { Client } from 'pg';
import { DataSource } from 'typeorm';

import { DurableFsm, EngineService, GenDurableModule, type StepContext } from '../lib';
import { migrateUp } from '../lib/schema/migrator';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startEmbeddedPostgres } = require('../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(): Promise<{ url: string; stop(): Promise<void> }>;
};

const KEYS = Number(process.env['KEYS'] ?? 10_000);
const PER_KEY = Number(process.env['PER_KEY'] ?? 3);
const C = Number(process.env['C'] ?? 20);
const FAIL = Number(process.env['FAIL'] ?? 0.05);
const WORKERS = Number(process.env['WORKERS'] ?? 2);
const KILLS = Number(process.env['KILLS'] ?? 5);
const KILL_EVERY_S = Number(process.env['KILL_EVERY_S'] ?? 3);
const STEP_MS = Number(process.env['STEP_MS'] ?? 1);
const LEASE_MS = Number(process.env['LEASE_MS'] ?? 2000);
const TOTAL = KEYS * PER_KEY;
const ROLE = process.env['ROLE'] ?? 'main';

type SeqState = { key: string };

/** A stable pseudo-random draw in [0, 1) from an id. */
function draw(id: string): number {
  let h = 2166136261;
  for (const c of id) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return (h >>> 0) / 2 ** 32;
}

/** The DataSource the steps log their starts through (the worker's own). */
let log: DataSource | undefined;

@DurableFsm({
  name: 'seq-bench',
  sequenceKey: (s: SeqState) => s.key,
  history: 'transitions',
})
class SeqBench {
  async perform(args: SeqState, ctx: StepContext<SeqState>): Promise<undefined> {
    await log?.query(
      `INSERT INTO seq_starts (instance_id, key, attempt, started_at) VALUES ($1, $2, $3, clock_timestamp())`,
      [ctx.id, args.key, ctx.attempt],
    );
    if (STEP_MS > 0) await new Promise((resolve) => setTimeout(resolve, STEP_MS));
    // An injected failure: the job retry rule retries it after a backoff, and the head holds
    // its key meanwhile.
    if (ctx.attempt <= 1 && draw(ctx.id) < FAIL) throw new Error('injected step failure');
    return undefined;
  }
}

function dataSource(url: string, max = 10): DataSource {
  return new DataSource({ type: 'postgres', url, extra: { max } });
}

/** A worker: one engine serving the default queue until it is killed (or told to stop). */
async function worker(url: string): Promise<void> {
  // The engine's connections and one per running step's start log.
  const ds = dataSource(url, 10 + C);
  await ds.initialize();
  log = ds;
  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource: ds,
        queues: { default: C },
        gc: false,
        leaseTtl: LEASE_MS,
        heartbeatInterval: Math.floor(LEASE_MS / 4),
        // Reap quickly, and never poison a head for being reaped: a killed worker's rows come
        // back each time, however often a kill lands on them.
        reaper: { interval: 250, maxReaps: 1000 },
      }),
    ],
    providers: [SeqBench],
  })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error'] });
  await app.init();
  process.send?.('ready');
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0));
  });
}

async function countDone(ds: DataSource): Promise<number> {
  const rows = (await ds.query(
    `SELECT count(*)::int AS n FROM gen_durable_all WHERE fsm = 'seq-bench' AND status = 'done'`,
  )) as { n: number }[];
  return rows[0]!.n;
}

async function main(): Promise<void> {
  const embedded = process.env['DATABASE_URL'] ? undefined : await startEmbeddedPostgres();
  const server = process.env['DATABASE_URL'] ?? embedded!.url;
  const name = `gd_sequences_${Date.now()}`;
  const admin = new Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  const dbUrl = url.toString();
  const ds = dataSource(dbUrl);
  const workers = new Set<ChildProcess>();
  let kills = 0;
  let stopping = false;
  const spawnWorker = (): Promise<ChildProcess> => {
    const child = fork(__filename, [], {
      env: { ...process.env, ROLE: 'worker', SEQ_DB_URL: dbUrl },
      execArgv: process.execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    workers.add(child);
    child.on('exit', () => workers.delete(child));
    return new Promise((resolve) => child.once('message', () => resolve(child)));
  };
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    await ds.query(
      `CREATE TABLE seq_starts (instance_id bigint NOT NULL, key text NOT NULL, attempt int NOT NULL,
                                started_at timestamptz NOT NULL)`,
    );
    if (WORKERS === 0) log = ds;
    @Module({
      imports: [
        GenDurableModule.forRoot({
          dataSource: ds,
          queues: WORKERS === 0 ? { default: C } : {},
          gc: false,
        }),
      ],
      providers: [SeqBench],
    })
    class SequencesModule {}
    const app = await NestFactory.createApplicationContext(SequencesModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    for (let i = 0; i < WORKERS; i++) await spawnWorker();
    const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
    const t0 = performance.now();
    // Kills: every KILL_EVERY_S a random worker is SIGKILLed and a new one started.
    const killer =
      WORKERS > 0 && KILLS > 0
        ? setInterval(() => {
            if (stopping || kills >= KILLS) return;
            const victims = [...workers];
            const victim = victims[Math.floor(Math.random() * victims.length)];
            if (!victim) return;
            victim.kill('SIGKILL');
            kills++;
            void spawnWorker();
          }, KILL_EVERY_S * 1000)
        : undefined;
    for (let round = 0; round < PER_KEY; round++) {
      for (let i = 0; i < KEYS; i += 1_000) {
        await engine.insertAll(
          SeqBench,
          keys.slice(i, i + 1_000).map((key) => ({ state: { key } })),
        );
      }
    }
    // Drained when every instance is done (and every kill happened, so none is skipped).
    for (;;) {
      const n = await countDone(ds);
      if (n === TOTAL && (kills >= KILLS || WORKERS === 0)) break;
      if (performance.now() - t0 > 30 * 60_000) throw new Error(`not drained: ${n} of ${TOTAL}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const seconds = (performance.now() - t0) / 1000;
    stopping = true;
    if (killer) clearInterval(killer);
    await Promise.all(
      [...workers].map(
        (w) =>
          new Promise<void>((resolve) => {
            w.once('exit', () => resolve());
            w.send('stop');
          }),
      ),
    );

    // The checks, from the database.
    const [starts] = (await ds.query(
      `WITH inst AS (
         SELECT g.id, g.state->>'key' AS key,
                lag(g.id) OVER (PARTITION BY g.state->>'key' ORDER BY g.id) AS prev
           FROM gen_durable_all g WHERE g.fsm = 'seq-bench'
       ), done_at AS (
         SELECT h.instance_id, min(h.at) AS at
           FROM gen_durable_history_all h WHERE h.kind = 'done' GROUP BY h.instance_id
       ), first_start AS (
         SELECT s.instance_id, min(s.started_at) AS at FROM seq_starts s GROUP BY s.instance_id
       ), first_outcome AS (
         SELECT h.instance_id, min(h.at) AS at
           FROM gen_durable_history_all h
          WHERE h.kind IN ('done', 'retry') GROUP BY h.instance_id
       )
       SELECT count(*) FILTER (WHERE fs.at <= d.at)::int AS start_violations,
              count(*) FILTER (WHERE fo.at <= d.at)::int AS history_violations,
              count(*) FILTER (WHERE d.at IS NULL OR fs.at IS NULL)::int AS missing,
              count(*)::int AS pairs
         FROM inst i
         JOIN done_at d ON d.instance_id = i.prev
         LEFT JOIN first_start fs ON fs.instance_id = i.id
         LEFT JOIN first_outcome fo ON fo.instance_id = i.id
        WHERE i.prev IS NOT NULL`,
    )) as {
      start_violations: number;
      history_violations: number;
      missing: number;
      pairs: number;
    }[];
    const [runs] = (await ds.query(
      `SELECT count(*)::int AS runs,
              count(*) - count(DISTINCT instance_id)::int AS reruns
         FROM seq_starts`,
    )) as { runs: number; reruns: number }[];
    const [hist] = (await ds.query(
      `SELECT count(*) FILTER (WHERE kind = 'retry')::int AS retries,
              count(*) FILTER (WHERE kind = 'reaped')::int AS reaped,
              count(*) FILTER (WHERE kind = 'done')::int AS dones
         FROM gen_durable_history_all`,
    )) as { retries: number; reaped: number; dones: number }[];
    await app.close();
    const s = starts!;
    console.log(
      `sequences: ${KEYS} keys × ${PER_KEY} = ${TOTAL} instances, C=${C} per worker, ` +
        `${WORKERS} worker process(es), ${kills} SIGKILL(s) every ${KILL_EVERY_S} s (lease ${LEASE_MS} ms), ` +
        `FAIL=${FAIL}: ${runs!.runs} step runs (${runs!.reruns} re-runs), history: ${hist!.retries} retry outcomes, ` +
        `${hist!.reaped} reaped, ${hist!.dones} done; ` +
        `${s.pairs} ordered pairs checked: ${s.start_violations} runs started before the older instance's done, ` +
        `${s.history_violations} outcomes committed before it, ${s.missing} missing; ` +
        `drained in ${seconds.toFixed(1)} s`,
    );
    if (s.start_violations > 0 || s.history_violations > 0 || s.missing > 0) process.exitCode = 1;
  } finally {
    stopping = true;
    for (const w of workers) w.kill('SIGKILL');
    await ds.destroy().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    await embedded?.stop();
  }
}

if (ROLE === 'worker') {
  worker(process.env['SEQ_DB_URL']!).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(process.exitCode ?? 0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
