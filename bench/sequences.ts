/**
 * `npm run bench:sequences`: strict order per key under failures (docs/sequences.md,
 * docs/performance.md "Sequences") in ONE process and database: KEYS sequence keys with
 * PER_KEY instances each, inserted round by round (every key's first instance, then every
 * key's second, …) with insertAll, drained by one engine with `queues: { default: C }`. FAIL
 * of the first step runs (chosen by a hash of the instance id) return `retry(state, 50)`: the
 * head waits on a backoff while the rest of its key is due. Order is checked from the steps'
 * own start log: per key, the instance ids at step starts must never go down (a retry of the
 * same instance repeats its id), and an instance must not start while an older one of its key
 * has not finished. Prints the violations (0 expected), the retries and the drain rate.
 *
 *   KEYS=10000 PER_KEY=3 C=20 FAIL=0.05 npm run bench:sequences
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
  EngineService,
  GenDurableModule,
  retry,
  Step,
  type StepContext,
} from '../lib';
import { migrateUp } from '../lib/schema/migrator';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startEmbeddedPostgres } = require('../scripts/embedded-postgres.cjs') as {
  startEmbeddedPostgres(): Promise<{ url: string; stop(): Promise<void> }>;
};

const KEYS = Number(process.env['KEYS'] ?? 10_000);
const PER_KEY = Number(process.env['PER_KEY'] ?? 3);
const C = Number(process.env['C'] ?? 20);
const FAIL = Number(process.env['FAIL'] ?? 0.05);
const TOTAL = KEYS * PER_KEY;

type SeqState = { key: string; retried?: boolean };

/** Per key: the instance ids in step-start order. */
const starts = new Map<string, string[]>();
/** Instances whose step finished (done returned). */
const finished = new Set<string>();
/** Per key: its instance ids in insert (id) order. */
const idsOf = new Map<string, string[]>();
let retries = 0;
let overlaps = 0;
let finals = 0;
let allDone: () => void = () => undefined;

/** A stable pseudo-random draw in [0, 1) from an id. */
function draw(id: string): number {
  let h = 2166136261;
  for (const c of id) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return (h >>> 0) / 2 ** 32;
}

@DurableFsm({ name: 'seq-bench', sequenceKey: (s: SeqState) => s.key })
class SeqBench {
  @Step() start(ctx: StepContext<SeqState>) {
    const key = ctx.state.key;
    let list = starts.get(key);
    if (!list) starts.set(key, (list = []));
    list.push(ctx.id);
    // Every older instance of the key must have finished.
    for (const older of idsOf.get(key) ?? []) {
      if (BigInt(older) >= BigInt(ctx.id)) break;
      if (!finished.has(older)) overlaps++;
    }
    if (!ctx.state.retried && draw(ctx.id) < FAIL) {
      retries++;
      return retry({ ...ctx.state, retried: true }, 50);
    }
    finished.add(ctx.id);
    if (++finals === TOTAL) allDone();
    return done({});
  }
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
  const ds = new DataSource({ type: 'postgres', url: url.toString(), extra: { max: 10 } });
  try {
    await ds.initialize();
    await migrateUp({ query: (text, params) => ds.query(text, params), inTransaction: false });
    @Module({
      imports: [GenDurableModule.forRoot({ dataSource: ds, queues: { default: C }, gc: false })],
      providers: [SeqBench],
    })
    class SequencesModule {}
    const app = await NestFactory.createApplicationContext(SequencesModule, { logger: ['error'] });
    await app.init();
    const engine = app.get(EngineService);
    const finishedAll = new Promise<void>((resolve) => (allDone = resolve));
    const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}`);
    const t0 = performance.now();
    for (let round = 0; round < PER_KEY; round++) {
      for (let i = 0; i < KEYS; i += 1_000) {
        const slice = keys.slice(i, i + 1_000);
        const ids = await engine.insertAll(
          SeqBench,
          slice.map((key) => ({ state: { key } })),
        );
        slice.forEach((key, j) => {
          let list = idsOf.get(key);
          if (!list) idsOf.set(key, (list = []));
          list.push(ids[j]!);
        });
      }
    }
    await finishedAll;
    const seconds = (performance.now() - t0) / 1000;
    let violations = 0;
    for (const [key, list] of starts) {
      for (let i = 1; i < list.length; i++) {
        if (BigInt(list[i]!) < BigInt(list[i - 1]!)) violations++;
      }
      if (new Set(list).size !== idsOf.get(key)!.length) violations++;
    }
    await app.close();
    console.log(
      `sequences: ${KEYS} keys × ${PER_KEY} = ${TOTAL} instances, C=${C}, FAIL=${FAIL}: ` +
        `${retries} retried heads (backoff 50 ms), ${violations} order violations, ` +
        `${overlaps} starts while an older instance of the key was unfinished; ` +
        `drained in ${seconds.toFixed(1)} s (${((TOTAL + retries) / seconds).toFixed(0)} steps/s)`,
    );
    if (violations > 0 || overlaps > 0) process.exitCode = 1;
  } finally {
    await ds.destroy().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
    await embedded?.stop();
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
