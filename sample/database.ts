import type { TypeOrmModuleOptions } from '@nestjs/typeorm';

import { SetupGenDurable1700000000000 } from './migrations/1700000000000-setup-gen-durable';
import { CreateSampleOrders1700000000001 } from './migrations/1700000000001-create-sample-orders';

/**
 * The sample's TypeORM connection: `DATABASE_URL` (set by `npm run sample`, which starts an
 * embedded PostgreSQL when none is configured). Migrations run at boot, so the gen-durable
 * tables exist before anything else starts.
 */
export function sampleDatabaseOptions(env: NodeJS.ProcessEnv = process.env): TypeOrmModuleOptions {
  const url = env['DATABASE_URL'];
  if (!url) {
    throw new Error(
      'gen-durable sample: DATABASE_URL is not set. Start the sample with `npm run sample` ' +
        '(embedded PostgreSQL) or set DATABASE_URL=postgres://user:password@host:5432/database.',
    );
  }
  return {
    type: 'postgres',
    url,
    migrations: [SetupGenDurable1700000000000, CreateSampleOrders1700000000001],
    migrationsRun: true,
    // TCP keepalive on the pool the engine shares (docs/design.md §26.4): a half-open connection is
    // noticed by the kernel instead of hanging a statement until statementTimeout.
    extra: { keepAlive: true },
    // A sample should fail fast and say why, not retry for half a minute.
    retryAttempts: 2,
    retryDelay: 1000,
  };
}
