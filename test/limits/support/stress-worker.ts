// A scheduler node in its own process for test/limits/stress.spec.ts, run as
// `node -r test/support/ts-register.cjs stress-worker.ts`. It boots one engine on the test
// database (env STRESS_DATABASE_URL) serving queue `stress`, reports {type: 'ready'} over IPC,
// and on {type: 'stop'} drains, closes and exits 0. Each step logs its start and end
// (clock_timestamp, one server clock) in stress_log, so the parent can sample live holders
// and check every interval afterwards.
import 'reflect-metadata';

import { type DynamicModule, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  GenDurableModule,
  type GenDurableOptions,
  next,
  Step,
  type StepContext,
} from '../../../lib';

const url = process.env['STRESS_DATABASE_URL'];
const node = process.env['STRESS_NODE'] ?? `stress-${process.pid}`;
const limiter = process.env['STRESS_LIMITER']
  ? (JSON.parse(process.env['STRESS_LIMITER']) as GenDurableOptions['limiter'])
  : 'postgres';
if (!url) throw new Error('STRESS_DATABASE_URL is not set');
const pool = new Pool({ connectionString: url, max: 4 });

interface StressState {
  readonly key: string | null;
}

async function hold(ctx: StepContext<StressState>): Promise<void> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO stress_log (row_id, step, key, node, started_at) VALUES ($1, $2, $3, $4, clock_timestamp()) RETURNING id`,
    [ctx.id, ctx.step, ctx.state.key, node],
  );
  await new Promise((resolve) => setTimeout(resolve, 5 + Math.floor(Math.random() * 20)));
  await pool.query(`UPDATE stress_log SET ended_at = clock_timestamp() WHERE id = $1`, [
    rows[0]!.id,
  ]);
}

@DurableFsm({ name: 'stress', queue: 'stress' })
class StressFsm {
  @Step() async start(ctx: StepContext<StressState>) {
    await hold(ctx);
    return next('second', ctx.state);
  }
  @Step() async second(ctx: StepContext<StressState>) {
    await hold(ctx);
    return done({});
  }
}

function stressModule(dataSource: DataSource): DynamicModule {
  @Module({})
  class StressModule {}
  return {
    module: StressModule,
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        queues: { stress: 4 },
        concurrencyLimits: { g: { limit: 5, shards: 2 } },
        limiter,
        nodeId: node,
        leaseTtl: 10_000,
        heartbeatInterval: 1_000,
        pollInterval: 20,
        maxPollInterval: 100,
        reaper: { interval: 1_000 },
        gc: false,
        drainTimeout: 5_000,
      }),
    ],
    providers: [StressFsm],
  };
}

async function main(): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url, poolSize: 8 });
  await dataSource.initialize();
  const app = await NestFactory.createApplicationContext(stressModule(dataSource), {
    logger: ['error'],
  });
  await app.init();
  process.on('message', (m: { type?: string }) => {
    if (m.type !== 'stop') return;
    void (async () => {
      await app.close();
      await dataSource.destroy();
      await pool.end();
      process.exit(0);
    })();
  });
  process.send?.({ type: 'ready', node });
}

main().catch((err: unknown) => {
  process.stderr.write(`stress worker ${node} failed: ${String(err)}\n`);
  process.exit(1);
});
