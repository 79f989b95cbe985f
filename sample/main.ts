import 'reflect-metadata';

import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { AppModule } from './app.module';
import { DEMO_DASHBOARD_TOKEN } from './dashboard/demo-dashboard.guard';
import { ScheduleLogger } from './reports/schedule-logger';

async function bootstrap(): Promise<void> {
  // abortOnError: false makes a failed boot (database down, migration error) reject here, so
  // we log it and exit 1 instead of Nest calling process.abort().
  const app = await NestFactory.create(AppModule, { abortOnError: false });
  // SIGINT/SIGTERM run the shutdown hooks (drain, then close the DataSource) before exit.
  app.enableShutdownHooks();
  const port = Number(process.env['PORT'] ?? 3000);
  await app.listen(port);
  const url = (await app.getUrl()).replace('[::1]', 'localhost').replace('127.0.0.1', 'localhost');
  new Logger('Sample').log(`gen-durable sample listening on ${url}`);
  new Logger('Sample').log(`dashboard: ${url}/durable?token=${DEMO_DASHBOARD_TOKEN}`);
  await app.get(ScheduleLogger).logSchedules();
}

bootstrap().catch((err: unknown) => {
  new Logger('Sample').error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  // A half-booted app may still hold sockets: exit rather than hang.
  process.exit(1);
});
