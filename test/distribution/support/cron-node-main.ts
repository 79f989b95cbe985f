// One node of the multi-process cron test (docs/design.md §29): a Nest application context in
// its own process whose engine declares the every-second schedule `pulse` and runs its queue,
// reaper on, forked by test/distribution/cron-multi-process.spec.ts with
// test/support/ts-register.cjs. It tells the parent `ready` once booted; `shutdown` (IPC)
// closes it; the parent may SIGKILL it instead.
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';

import { done, DurableCron, DurableFsm, GenDurableModule, Step } from '../../../lib';

interface CronNodeConfig {
  readonly url: string;
  readonly nodeId: string;
}

const config = JSON.parse(process.env['GD_CRON_NODE'] ?? 'null') as CronNodeConfig | null;
if (!config) throw new Error('cron-node-main: GD_CRON_NODE is not set');
const nodeConfig: CronNodeConfig = config;

/** Every second; an occurrence missed while every node stalled is caught up (`all`). */
@DurableCron('* * * * * *', { name: 'pulse', missed: 'all', maxCatchup: 1000 })
@DurableFsm({ name: 'pulse', queue: 'pulse' })
class PulseFsm {
  @Step() start() {
    return done({ node: nodeConfig.nodeId });
  }
}

async function main(): Promise<void> {
  const dataSource = await new DataSource({
    type: 'postgres',
    url: nodeConfig.url,
    poolSize: 4,
  }).initialize();

  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        nodeId: nodeConfig.nodeId,
        queues: { pulse: 2 },
        poke: 'none',
        pollInterval: 200,
        maxPollInterval: 500,
        leaseTtl: 2_000,
        heartbeatInterval: 500,
        reaper: { interval: 500 },
        gc: false,
        schedules: { interval: 1_000 },
      }),
    ],
    providers: [PulseFsm],
  })
  class CronNodeModule {}

  const app = await NestFactory.createApplicationContext(CronNodeModule, {
    logger: ['error', 'warn'],
  });
  process.on('message', (message: unknown) => {
    if ((message as { type?: string }).type === 'shutdown') {
      void app
        .close()
        .then(() => dataSource.destroy())
        .then(() => process.exit(0));
    }
  });
  process.send?.({ type: 'ready' });
}

main().catch((err: unknown) => {
  process.stderr.write(
    `cron-node-main failed: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  process.exit(1);
});
