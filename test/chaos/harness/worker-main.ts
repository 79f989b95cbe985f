// A chaos worker (docs/reliability.md §3.1): a real Nest application in its own process, forked by
// the orchestrator with test/support/ts-register.cjs. Its engine reaches PostgreSQL through
// this worker's fault proxy; the test FSMs write the ledgers through their own pool, straight
// to the server. Engine events and the engine's error/warning log lines go to chaos.events.
import 'reflect-metadata';

import { Injectable, type LoggerService, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import {
  EngineService,
  getEngineToken,
  GenDurableModule,
  type GenDurableEventName,
  InjectEngine,
} from '../../../lib';
import { CHAOS_FSMS, LEASE_MS, LEDGER } from './chaos-fsms';
import { LedgerWriter } from './ledger';
import type { WorkerConfig } from './protocol';

const config = JSON.parse(process.env['GD_CHAOS_WORKER'] ?? 'null') as WorkerConfig | null;
if (!config) throw new Error('worker-main: GD_CHAOS_WORKER is not set');
const cfg: WorkerConfig = config;

const ledgerPool = new Pool({
  connectionString: cfg.ledgerUrl,
  max: 6,
  application_name: `gd-${cfg.name}-ledger`,
});
ledgerPool.on('error', () => undefined);
const ledger = new LedgerWriter(ledgerPool, cfg.name);

const RECORDED: GenDurableEventName[] = [
  'outcome:stale',
  'executor:crash',
  'flush:error',
  'reaper:reaped',
  'reaper:poisoned',
  'reaper:suspect',
  'scheduler:solo',
  'scheduler:reclaimed',
  'scheduler:stall',
  'await:timeout',
  'gc:swept',
  'boot:warning',
  'concurrency:contended',
];

/** Routes the engine's error and warning lines to the ledger (F-CRASH, F-HALFOPEN evidence). */
class ChaosLogger implements LoggerService {
  log(): void {}
  verbose(): void {}
  debug(): void {}
  warn(message: unknown): void {
    void ledger.event('log:warn', { detail: String(message).slice(0, 500) }).catch(() => undefined);
  }
  error(message: unknown): void {
    process.stderr.write(`[${cfg.name}] ${String(message)}\n`);
    void ledger
      .event('log:error', { detail: String(message).slice(0, 500) })
      .catch(() => undefined);
  }
}

/**
 * Records the engine's events in the ledger from construction on: boot-time events (startup
 * reclaim, the reaper's sweep at start, a poison pill failed by it) are emitted inside
 * createApplicationContext, before it returns.
 */
@Injectable()
class EventRecorder {
  constructor(@InjectEngine('chaos') engine: EngineService) {
    engine.events$.subscribe((e) => {
      if (!RECORDED.includes(e.event)) return;
      const id = typeof e.metadata['id'] === 'string' ? e.metadata['id'] : null;
      void ledger
        .event(e.event, {
          id,
          count: e.measurements['count'] ?? 1,
          detail: JSON.stringify({ ...e.metadata, ...e.measurements }).slice(0, 500),
        })
        .catch(() => undefined);
    });
  }
}

async function main(): Promise<void> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: cfg.databaseUrl,
    // The engine's own connections plus one per transactional step that can run at once.
    poolSize: 10 + cfg.txConcurrency,
    applicationName: `gd-${cfg.name}-engine`,
    extra: {
      keepAlive: true,
      ...(cfg.connectTimeoutMs ? { connectionTimeoutMillis: cfg.connectTimeoutMs } : {}),
    },
  });
  // The data source must come up even while Postgres restarts.
  for (let attempt = 0; ; attempt++) {
    try {
      await dataSource.initialize();
      break;
    } catch (err) {
      if (attempt > 100) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        name: 'chaos',
        nodeId: cfg.name,
        queues: {
          default: cfg.concurrency,
          children: cfg.childConcurrency,
          tx: cfg.txConcurrency,
        },
        poke: cfg.redisUrl ? { redis: cfg.redisUrl } : 'postgres',
        leaseTtl: LEASE_MS,
        heartbeatInterval: 500,
        pollInterval: 100,
        maxPollInterval: 500,
        drainTimeout: 1_000,
        statementTimeout: cfg.statementTimeoutMs,
        flushers: [{ queues: 'all', maxBatch: 50, maxDelayMs: 10 }],
        reaper: cfg.reaper ? { interval: 250 } : false,
        gc: cfg.gc
          ? {
              interval: 2_000,
              retention: cfg.gcRetentionMs,
              failedRetention: cfg.gcRetentionMs,
              cancelledRetention: cfg.gcRetentionMs,
              batch: 500,
            }
          : false,
      }),
    ],
    providers: [{ provide: LEDGER, useValue: ledger }, ...CHAOS_FSMS, EventRecorder],
  })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, {
    logger: new ChaosLogger(),
  });
  const engine = app.get<EngineService>(getEngineToken('chaos'));

  let closing = false;
  const shutdown = async (code: number): Promise<void> => {
    if (closing) return;
    closing = true;
    await app.close();
    await dataSource.destroy().catch(() => undefined);
    await ledgerPool.end().catch(() => undefined);
    process.exit(code);
  };
  process.on('message', (raw: unknown) => {
    if ((raw as { type?: string }).type === 'shutdown') void shutdown(0);
  });
  process.on('SIGTERM', () => void shutdown(0));
  process.on('disconnect', () => process.exit(1)); // the orchestrator died: never linger
  process.send?.({
    type: 'ready',
    pid: process.pid,
    workers: [...engine.runtime.schedulers.values()].map((s) => s.workerId),
  });
}

for (const kind of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(kind, (err: unknown) => {
    const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
    process.stderr.write(`[${cfg.name}] ${kind}: ${text}\n`);
    process.send?.({ type: 'fatal', error: `${kind}: ${text}` });
    void ledger
      .event('fatal', { detail: `${kind}: ${text}`.slice(0, 500) })
      .catch(() => undefined)
      .finally(() => process.exit(70));
  });
}

main().catch((err: unknown) => {
  process.send?.({
    type: 'fatal',
    error: err instanceof Error ? (err.stack ?? err.message) : String(err),
  });
  process.exit(1);
});
