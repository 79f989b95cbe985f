// One node of the cron downtime test (docs/design.md §29): a Nest application context in its own
// process whose engine has the FSM `downtime` and runs its queue (reaper on, so it ticks
// schedules), forked by test/distribution/cron-downtime.spec.ts with
// test/support/ts-register.cjs. It declares no schedule: the parent asks one node to upsert the
// run-time schedules (IPC `upsert`), so their occurrences are placed after every node booted and
// a restart does not redefine them. With `standby: true` it loads its code (the TypeScript
// compile is most of a cold start on a busy machine), tells the parent `loaded`, and starts no
// engine until the parent sends `boot`: the replacement processes of a restart are warmed while
// the old ones still run, so the downtime the test measures is the engines', not the compiler's.
// It tells the parent `ready` once booted (its first schedule tick has then run); `shutdown`
// (IPC) closes it; the parent SIGKILLs it to stop it hard.
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';

import {
  type CronFireInfo,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  type ScheduleSpec,
  Step,
  type StepContext,
} from '../../../lib';

interface DowntimeNodeConfig {
  readonly url: string;
  readonly nodeId: string;
  readonly standby?: boolean;
}

type NodeMessage =
  | { readonly type: 'boot' }
  | { readonly type: 'upsert'; readonly specs: readonly ScheduleSpec[] }
  | { readonly type: 'shutdown' };

function bootRequested(): Promise<void> {
  return new Promise((resolve) => {
    const onMessage = (raw: unknown) => {
      if ((raw as NodeMessage).type !== 'boot') return;
      process.off('message', onMessage);
      resolve();
    };
    process.on('message', onMessage);
    process.send?.({ type: 'loaded' });
  });
}

const config = JSON.parse(process.env['GD_CRON_NODE'] ?? 'null') as DowntimeNodeConfig | null;
if (!config) throw new Error('cron-downtime-node-main: GD_CRON_NODE is not set');
const nodeConfig: DowntimeNodeConfig = config;

/** Each fire ends at once with the occurrence it stands for and the node that ran it. */
@DurableFsm({ name: 'downtime', queue: 'downtime' })
class DowntimeFsm {
  @Step() start(ctx: StepContext<{ _cron: CronFireInfo }>) {
    return done({ cron: ctx.state._cron, node: nodeConfig.nodeId });
  }
}

async function main(): Promise<void> {
  if (nodeConfig.standby) await bootRequested();
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
        queues: { downtime: 2 },
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
    providers: [DowntimeFsm],
  })
  class DowntimeNodeModule {}

  const app = await NestFactory.createApplicationContext(DowntimeNodeModule, {
    logger: ['error', 'warn'],
  });
  const engine = app.get(EngineService);
  process.on('message', (raw: unknown) => {
    const message = raw as NodeMessage;
    if (message.type === 'upsert') {
      void (async () => {
        for (const spec of message.specs) await engine.schedules.upsert(spec);
        process.send?.({ type: 'upserted' });
      })();
    } else if (message.type === 'shutdown') {
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
    `cron-downtime-node-main failed: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  process.exit(1);
});
