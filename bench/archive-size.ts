/**
 * `npm run bench:archive`: the hot table's size after a drain with and without the archive
 * (docs/performance.md, "Archive: hot table size"; docs/archive.md). For each variant, a fresh
 * database: ROUNDS rounds of N/ROUNDS 3-step machines (next, next, done) drained by one worker
 * (`queues: { default: C }`), each round followed by one GC sweep and a plain VACUUM of the hot
 * table (what autovacuum would do between rounds; this machine's server runs with autovacuum
 * off). Variant `off`: `gc.archive: 'off'` (every ended row stays for its retention, 1 day);
 * variant `hour`: the default archive, rows moved as soon as they ended (`archiveAfter: 0`). Prints per variant the hot table's rows, heap and index
 * sizes (pg_relation_size, pg_indexes_size), the archive's rows and size, and the time of the
 * sweeps that moved the rows.
 *
 *   N=50000 ROUNDS=5 C=20 npm run bench:archive
 *
 * Uses DATABASE_URL (a server where it may CREATE DATABASE) or the embedded PostgreSQL.
 */
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { Client } from 'pg';
import { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  type EngineService,
  GenDurableModule,
  getEngineToken,
  next,
  Step,
  type StepContext,
} from '../lib';
import { migrateUp } from '../lib/schema/migrator';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startEmbeddedPostgres } = require('../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(): Promise<{ url: string; stop(): Promise<void> }>;
};

const N = Number(process.env['N'] ?? 50_000);
const ROUNDS = Number(process.env['ROUNDS'] ?? 5);
const C = Number(process.env['C'] ?? 20);
const PER_ROUND = Math.ceil(N / ROUNDS);

let finals = 0;
let target = 0;
let roundDone: () => void = () => undefined;

@DurableFsm({ name: 'archive-bench' })
class ArchiveBench {
  @Step() start(ctx: StepContext) {
    return next('b', ctx.state);
  }
  @Step() b(ctx: StepContext) {
    return next('c', ctx.state);
  }
  @Step() c() {
    if (++finals === target) roundDone();
    return done({ ok: true });
  }
}

const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

async function variant(server: string, archive: 'off' | 'hour'): Promise<void> {
  const name = `gd_archive_${archive}_${Date.now()}`;
  const admin = new Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  const ds = new DataSource({ type: 'postgres', url: url.toString(), extra: { max: 10 } });
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    @Module({
      imports: [
        GenDurableModule.forRoot({
          dataSource: ds,
          name: `archive-${archive}`,
          queues: { default: C },
          reaper: false,
          gc: { interval: 3_600_000, archive, archiveAfter: 0, batch: 10_000 },
        }),
      ],
      providers: [ArchiveBench],
    })
    class BenchModule {}
    const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
    await app.init();
    const engine = app.get<EngineService>(getEngineToken(`archive-${archive}`));
    let sweepMs = 0;
    for (let round = 0; round < ROUNDS; round++) {
      finals = 0;
      target = PER_ROUND;
      const finished = new Promise<void>((resolve) => (roundDone = resolve));
      for (let k = 0; k < PER_ROUND; k += 5_000) {
        await engine.insertAll(
          ArchiveBench,
          Array.from({ length: Math.min(5_000, PER_ROUND - k) }, () => ({ state: {} })),
        );
      }
      await finished;
      await new Promise((resolve) => setTimeout(resolve, 300));
      const t0 = performance.now();
      await engine.runtime.gc!.sweep();
      sweepMs += performance.now() - t0;
      await ds.query('VACUUM gen_durable');
    }
    const [hot] = (await ds.query(
      `SELECT (SELECT count(*) FROM gen_durable)::int AS rows,
              pg_relation_size('gen_durable')::bigint AS heap,
              pg_indexes_size('gen_durable')::bigint AS indexes,
              (SELECT count(*) FROM gen_durable_archive)::int AS archived,
              (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_inherits i
                 JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'gen_durable_archive'::regclass)::bigint AS archive_size`,
    )) as { rows: number; heap: string; indexes: string; archived: number; archive_size: string }[];
    console.log(
      `archive ${archive.padEnd(4)}: N=${N} in ${ROUNDS} rounds, C=${C}: hot table ${hot!.rows} rows, heap ${mib(Number(hot!.heap))}, indexes ${mib(Number(hot!.indexes))}; archive ${hot!.archived} rows, ${mib(Number(hot!.archive_size))}; GC sweeps ${sweepMs.toFixed(0)} ms in all`,
    );
    await app.close();
  } finally {
    await ds.destroy().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

async function main(): Promise<void> {
  const embedded = process.env['DATABASE_URL'] ? undefined : await startEmbeddedPostgres();
  const server = process.env['DATABASE_URL'] ?? embedded!.url;
  try {
    await variant(server, 'off');
    await variant(server, 'hour');
  } finally {
    await embedded?.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${String((err as Error).stack ?? err)}\n`);
    process.exit(1);
  },
);
