// The compat app: boots the README's module with schedulers over HTTP and runs insert, signal,
// await, a job with a retry and the health checks; engine errors over HTTP as typed statuses;
// the host's own `signals` table (created before the migration) intact; a failed instance kept
// past the done retention. Exit 0 and a last line `COMPAT OK …` mean every check held.
import 'reflect-metadata';

import { deepStrictEqual, strictEqual } from 'node:assert';

import { NestFactory } from '@nestjs/core';
import { HealthCheckService } from '@nestjs/terminus';
import { EngineService } from 'gen-durable';
import { GenDurableHealthIndicator } from 'gen-durable/health';
import { filter, firstValueFrom, timeout } from 'rxjs';
import { DataSource } from 'typeorm';

import { AppModule } from './app.module.js';
import { checkout } from './checkout.fsm.js';
import { Mailer, SendReceiptJob } from './receipt.job.js';

async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule.register('worker'), {
    logger: ['error', 'warn'],
  });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  try {
    const engine = app.get(EngineService);
    const dataSource = app.get(DataSource);
    const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');

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

    // The host's own `signals` table, made before the migration ran, is untouched.
    const host = await dataSource.query<{ body: string }[]>('SELECT body FROM signals');
    deepStrictEqual(host, [{ body: 'the host app owns this table' }]);

    // Engine errors over HTTP: 201, then 409 for the same order, 404 for an unknown one.
    const post = (path: string) => fetch(`${base}${path}`, { method: 'POST' });
    strictEqual((await post('/orders/h-1')).status, 201);
    const duplicate = await post('/orders/h-1');
    strictEqual(duplicate.status, 409);
    const conflict = (await duplicate.json()) as { error: string; stack?: unknown };
    strictEqual(conflict.error, 'GD_DUPLICATE');
    strictEqual(conflict.stack, undefined);
    const missing = await post('/orders/nobody/paid');
    strictEqual(missing.status, 404);
    strictEqual(((await missing.json()) as { error: string }).error, 'GD_NO_TARGET');
    strictEqual((await post('/orders/h-1/paid')).status, 201);

    // Retention: a failed instance outlives the done retention (1 day) by its own (7 days).
    const bounced = await engine.insert(SendReceiptJob, { args: { to: 'bounce@example.com' } });
    const failed = await engine.await(bounced, { until: 'terminal', timeout: 30_000 });
    strictEqual(failed.kind, 'failed');
    const swept = firstValueFrom(
      engine.events$.pipe(
        filter((e) => e.event === 'gc:swept' && (e.measurements['count'] ?? 0) > 0),
        timeout(30_000),
      ),
    );
    await dataSource.query(
      `UPDATE gen_durable SET updated_at = now() - interval '2 days' WHERE id = ANY ($1::bigint[])`,
      [[bounced, job]],
    );
    await swept;
    strictEqual(await engine.get(job), null);
    strictEqual((await engine.get(bounced))?.status, 'failed');

    process.stdout.write(
      `COMPAT OK ${JSON.stringify({ order, receipt, health: health.status, http: [201, 409, 404], keptFailed: bounced, redisPoke: Boolean(process.env['REDIS_URL']) })}\n`,
    );
  } finally {
    await app.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
