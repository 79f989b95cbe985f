// The compat app: boots the README's module with schedulers and runs insert, signal, await, a
// job with a retry and the health checks, then shuts down. Exit 0 and a last line `COMPAT OK …`
// mean every check held.
import 'reflect-metadata';

import { deepStrictEqual, strictEqual } from 'node:assert';

import { NestFactory } from '@nestjs/core';
import { HealthCheckService } from '@nestjs/terminus';
import { EngineService } from 'gen-durable';
import { GenDurableHealthIndicator } from 'gen-durable/health';

import { AppModule } from './app.module.js';
import { checkout } from './checkout.fsm.js';
import { Mailer, SendReceiptJob } from './receipt.job.js';

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule.register('worker'), {
    logger: ['error', 'warn'],
  });
  app.enableShutdownHooks();
  try {
    const engine = app.get(EngineService);

    const order = await checkout(engine, 'o-1');
    deepStrictEqual(order, { kind: 'done', result: { orderId: 'o-1', paid: true } });

    const job = await engine.insert(SendReceiptJob, { args: { to: 'a@example.com' } });
    const receipt = await engine.await(job, { until: 'terminal', timeout: 30_000 });
    deepStrictEqual(receipt, { kind: 'done', result: { to: 'a@example.com', attempt: 1 } });
    deepStrictEqual(app.get(Mailer).sent, ['a@example.com']);

    const health = await app
      .get(HealthCheckService)
      .check([
        () => app.get(GenDurableHealthIndicator).schedulerLiveness('schedulers'),
        () => app.get(GenDurableHealthIndicator).leaseBacklog('leases'),
      ]);
    strictEqual(health.status, 'ok');

    process.stdout.write(
      `COMPAT OK ${JSON.stringify({ order, receipt, health: health.status, redisPoke: Boolean(process.env['REDIS_URL']) })}\n`,
    );
  } finally {
    await app.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
