// A real worker process for the crash tests: a Nest application context running the engine
// over its own TypeORM DataSource, started by `forkWorker()` (child_process.fork with the
// ts-register hook). It reports over IPC: `ready` once booted, then the engine events the
// test watches; `shutdown` (or SIGTERM, through enableShutdownHooks) closes it gracefully.
import 'reflect-metadata';

import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';

import { EngineService, GenDurableModule, type GenDurableOptions } from '../../lib';
import { CrashyFsm, LEDGER_DATA_SOURCE, WORKER_NAME } from './fixtures/crash.fsm';
import { PillFsm } from './fixtures/pill.fsm';
import { StreamerFsm } from './fixtures/streamer.fsm';
import { TxLedgerFsm } from './fixtures/tx-ledger.fsm';

/** What the parent passes in the `GD_WORKER` environment variable (JSON). */
export interface WorkerConfig {
  readonly name: string;
  readonly url: string;
  readonly options: Partial<Omit<GenDurableOptions, 'dataSource'>>;
}

/** Messages a worker sends to its parent. */
export type WorkerMessage =
  | { readonly type: 'ready'; readonly workerIds: Record<string, string> }
  | { readonly type: 'event'; readonly event: string; readonly metadata: Record<string, unknown> };

const FORWARDED = new Set([
  'outcome:stale',
  'reaper:suspect',
  'reaper:poisoned',
  'scheduler:solo',
  'executor:crash',
  'reaper:reaped',
  'scheduler:drain',
  'scheduler:reclaimed',
  'scheduler:stall',
  'boot:warning',
]);

/**
 * Forwards the watched events from construction on: boot-time events (startup reclaim, the
 * reaper's sweep at start) are emitted inside createApplicationContext, before it returns.
 */
@Injectable()
class EventForwarder {
  constructor(engine: EngineService) {
    engine.events$.subscribe((e) => {
      if (FORWARDED.has(e.event)) send({ type: 'event', event: e.event, metadata: e.metadata });
    });
  }
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env['GD_WORKER'] ?? '') as WorkerConfig;
  const dataSource = await new DataSource({
    type: 'postgres',
    url: config.url,
    poolSize: 6,
  }).initialize();

  @Module({
    imports: [GenDurableModule.forRoot({ dataSource, ...config.options })],
    providers: [
      CrashyFsm,
      PillFsm,
      TxLedgerFsm,
      StreamerFsm,
      { provide: LEDGER_DATA_SOURCE, useValue: dataSource },
      { provide: WORKER_NAME, useValue: config.name },
      EventForwarder,
    ],
  })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, {
    logger: ['error', 'warn'],
  });
  app.enableShutdownHooks();
  const engine = app.get(EngineService);
  process.on('message', (message: unknown) => {
    if ((message as { type?: string }).type === 'shutdown') {
      void app
        .close()
        .then(() => dataSource.destroy())
        .then(() => process.exit(0));
    }
  });
  const workerIds: Record<string, string> = {};
  for (const [queue, scheduler] of engine.runtime.schedulers) workerIds[queue] = scheduler.workerId;
  send({ type: 'ready', workerIds });
}

function send(message: WorkerMessage): void {
  process.send?.(message);
}

main().catch((err: unknown) => {
  process.stderr.write(`worker failed to boot: ${String(err)}\n`);
  process.exit(1);
});
