// The chaos sender (docs/reliability.md §3.1): a web node (no queues, no reaper, no GC) that inserts
// the workload over the feed window and signals the parkers, recording every client call in
// chaos.client_ops — invoked/completed times and the result (ok, duplicate, no_target, error,
// unknown = the connection died after sending, Jepsen's :info). Inserts carry a correlation
// key held until GC, so a retry after an ambiguous failure is idempotent.
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import { DuplicateError, EngineService, GenDurableModule, NoTargetError } from '../../../lib';
import { isConnectionLevel } from '../../../lib/db/sql-executor';
import { CHAOS_FSMS, LEDGER } from './chaos-fsms';
import { LedgerWriter } from './ledger';
import type { SenderConfig } from './protocol';
import { mulberry32, shuffle } from './random';

const config = JSON.parse(process.env['GD_CHAOS_SENDER'] ?? 'null') as SenderConfig | null;
if (!config) throw new Error('sender-main: GD_CHAOS_SENDER is not set');
const cfg: SenderConfig = config;
const random = mulberry32(cfg.seed ^ 0x5eed);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const ledgerPool = new Pool({
  connectionString: cfg.databaseUrl,
  max: 4,
  application_name: 'gd-sender-ledger',
});
ledgerPool.on('error', () => undefined);
const ledger = new LedgerWriter(ledgerPool, 'sender');

interface Job {
  readonly fsm: string;
  readonly state: Record<string, unknown>;
  readonly concurrencyKey?: string;
}

function plan(): Job[] {
  const w = cfg.workload;
  const jobs: Job[] = [];
  for (let i = 0; i < w.linear; i++) jobs.push({ fsm: 'chaos_linear', state: { seq: 0 } });
  for (let i = 0; i < w.keyed; i++) {
    const key = `hot:${i % w.hotKeys}`;
    jobs.push({ fsm: 'chaos_linear', state: { seq: 0, key }, concurrencyKey: key });
  }
  for (let i = 0; i < w.retrier; i++) jobs.push({ fsm: 'chaos_retrier', state: { seq: 0 } });
  for (let i = 0; i < w.parker; i++) jobs.push({ fsm: 'chaos_parker', state: { seq: 0 } });
  for (let i = 0; i < w.fanout; i++) jobs.push({ fsm: 'chaos_fanout', state: { seq: 0 } });
  for (let i = 0; i < w.tree; i++) jobs.push({ fsm: 'chaos_tree', state: { seq: 0, level: 0 } });
  shuffle(jobs, random);
  // The self-inflicted faults go in after the first third, when every worker is busy.
  const third = Math.floor(jobs.length / 3);
  for (let i = 0; i < w.spinner; i++) {
    jobs.splice(third + i * 7, 0, { fsm: 'chaos_spinner', state: { seq: 0 } });
  }
  for (let i = 0; i < w.pill; i++) {
    jobs.splice(third + 3, 0, { fsm: 'chaos_pill', state: { seq: 0 } });
  }
  return jobs;
}

function op(row: {
  op: string;
  id?: string | null;
  fsm?: string | null;
  name?: string | null;
  dedup?: string | null;
  invoked: number;
  completed: number | null;
  result: string;
  detail?: string;
}): Promise<void> {
  return ledger.write(
    `INSERT INTO chaos.client_ops (op, instance_id, fsm, name, dedup_key, invoked_at, completed_at, result, detail)
     VALUES ($1, $2, $3, $4, $5, to_timestamp($6::float8 / 1000), to_timestamp($7::float8 / 1000), $8, $9)`,
    [
      row.op,
      row.id ?? null,
      row.fsm ?? null,
      row.name ?? null,
      row.dedup ?? null,
      row.invoked,
      row.completed,
      row.result,
      row.detail ?? null,
    ],
  );
}

function classify(err: unknown): 'unknown' | 'error' {
  return isConnectionLevel(err) ? 'unknown' : 'error';
}

async function main(): Promise<void> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: cfg.databaseUrl,
    poolSize: 12,
    applicationName: 'gd-sender-engine',
    extra: { connectionTimeoutMillis: 5_000 },
  });
  await dataSource.initialize();

  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        name: 'chaos',
        nodeId: 'sender',
        queues: {},
        reaper: false,
        gc: false,
        poke: cfg.redisUrl ? { redis: cfg.redisUrl } : 'postgres',
        statementTimeout: 5_000,
      }),
    ],
    providers: [{ provide: LEDGER, useValue: ledger }, ...CHAOS_FSMS],
  })
  class SenderModule {}

  const app = await NestFactory.createApplicationContext(SenderModule, { logger: ['error'] });
  const engine = app.get(EngineService);
  process.on('message', (raw: unknown) => {
    if ((raw as { type?: string }).type === 'shutdown') {
      void (async () => {
        await app.close();
        await dataSource.destroy().catch(() => undefined);
        await ledgerPool.end().catch(() => undefined);
        process.exit(0);
      })();
    }
  });
  process.on('disconnect', () => process.exit(1));
  process.send?.({ type: 'ready', pid: process.pid });

  const parkers: string[] = [];
  let signals = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();

  /** Inserts until acknowledged; every attempt is recorded. */
  const insert = async (job: Job, n: number): Promise<void> => {
    const key = `ins:${n}`;
    for (let attempt = 0; ; attempt++) {
      const invoked = Date.now();
      try {
        const id = await engine.insert(job.fsm, {
          state: job.state,
          correlationKey: key,
          correlationScope: [
            'runnable',
            'executing',
            'awaiting_signal',
            'awaiting_children',
            'done',
            'failed',
          ],
          ...(job.concurrencyKey ? { concurrencyKey: job.concurrencyKey } : {}),
        });
        await op({
          op: 'insert',
          id,
          fsm: job.fsm,
          invoked,
          completed: Date.now(),
          result: 'ok',
          detail: attempt > 0 ? `attempt ${attempt}` : undefined,
        });
        if (job.fsm === 'chaos_parker') {
          parkers.push(id);
          track(signalParker(id));
        }
        return;
      } catch (err) {
        if (err instanceof DuplicateError) {
          // An earlier, ambiguous attempt committed: the key finds it.
          const found = await engine.get({ correlationKey: key }).catch(() => null);
          if (found) {
            await op({
              op: 'insert',
              id: found.id,
              fsm: job.fsm,
              invoked,
              completed: Date.now(),
              result: 'ok',
              detail: 'found after an ambiguous attempt',
            });
            if (job.fsm === 'chaos_parker') {
              parkers.push(found.id);
              track(signalParker(found.id));
            }
            return;
          }
        }
        await op({
          op: 'insert',
          fsm: job.fsm,
          invoked,
          completed: Date.now(),
          result: err instanceof DuplicateError ? 'duplicate' : classify(err),
          detail: String(err).slice(0, 300),
        });
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
  };

  /** Signals until acknowledged or refused (a webhook that retries). */
  const send = async (id: string, name: string, dedup: string): Promise<'ok' | 'no_target'> => {
    for (let attempt = 0; ; attempt++) {
      const invoked = Date.now();
      try {
        await engine.signal({ id }, name, { dedup }, { dedupKey: dedup });
        signals++;
        await op({ op: 'signal', id, name, dedup, invoked, completed: Date.now(), result: 'ok' });
        return 'ok';
      } catch (err) {
        if (err instanceof NoTargetError) {
          await op({
            op: 'signal',
            id,
            name,
            dedup,
            invoked,
            completed: Date.now(),
            result: 'no_target',
          });
          return 'no_target';
        }
        await op({
          op: 'signal',
          id,
          name,
          dedup,
          invoked,
          completed: Date.now(),
          result: classify(err),
          detail: String(err).slice(0, 300),
        });
        await sleep(Math.min(100 * 2 ** attempt, 1_000));
      }
    }
  };

  const signalParker = async (id: string): Promise<void> => {
    // Around park time on purpose (S21): U(0, 30) ms after the insert was acknowledged.
    await sleep(Math.floor(random() * 30));
    await send(id, 'go', `go-${id}`);
    if (random() < cfg.workload.duplicateShare) {
      await sleep(Math.floor(random() * 50));
      await send(id, 'go', `go-${id}`);
    }
  };

  const track = (p: Promise<void>): void => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };

  const jobs = plan();
  const started = Date.now();
  for (const [n, job] of jobs.entries()) {
    const due = started + Math.floor((n * cfg.feedMs) / jobs.length);
    if (due > Date.now()) await sleep(due - Date.now());
    while (inFlight >= 16) await sleep(5);
    inFlight++;
    track(insert(job, n).finally(() => inFlight--));
  }
  while (pending.size > 0) await Promise.all([...pending]);

  // S25: a name nobody awaits, to parkers that have finished: must be refused, never stored.
  let late = 0;
  for (const id of parkers) {
    if (late >= cfg.workload.lateSignals) break;
    const view = await engine.get({ id }).catch(() => null);
    if (view?.status !== 'done') continue;
    late++;
    await send(id, 'late', `late-${id}`);
  }
  process.send?.({ type: 'fed', inserts: jobs.length, signals });
}

main().catch((err: unknown) => {
  process.send?.({
    type: 'fatal',
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
  });
  process.exit(1);
});
