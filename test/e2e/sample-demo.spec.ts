import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';

import { AppModule } from '../../sample/app.module';
import { Mailer } from '../../sample/notifications/send-email.job';
import { eventually } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// What `npm run sample` shows a new user: seeded orders run through fan-out, payment and the
// rate-limited, per-customer email job, and the HTTP API reports them.
describe('sample demo (SAMPLE_SEED=1)', () => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  const saved = {
    url: process.env['DATABASE_URL'],
    seed: process.env['SAMPLE_SEED'],
    quiet: process.env['SAMPLE_QUIET'],
  };

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    process.env['DATABASE_URL'] = db.url;
    process.env['SAMPLE_SEED'] = '1';
    process.env['SAMPLE_QUIET'] = '1';
    app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await app.listen(0);
    trackResource('sample demo app', () => app !== undefined);
  });

  afterAll(async () => {
    await app?.close();
    app = undefined;
    for (const [key, value] of [
      ['DATABASE_URL', saved.url],
      ['SAMPLE_SEED', saved.seed],
      ['SAMPLE_QUIET', saved.quiet],
    ] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    await db.drop();
  });

  it('pays the seeded orders and sends their emails under the rate limit, one per customer at a time', async () => {
    const server = app!.getHttpServer();
    for (const id of ['demo-1', 'demo-2', 'demo-3']) {
      const body = await eventually(async () => {
        const res = await request(server).get(`/orders/${id}`);
        return res.status === 200 ? (res.body as { status: string }) : undefined;
      }, 30_000);
      expect(body.status).toBe('paid');
    }
    const mailer = app!.get(Mailer);
    await eventually(async () => mailer.sent === 9, 30_000);
    const { rows } = await db.pool.query<{ n: number; first: Date; last: Date }>(
      `SELECT count(*)::int AS n, min(updated_at) AS first, max(updated_at) AS last FROM gen_durable WHERE fsm = 'send-email' AND status = 'done'`,
    );
    expect(rows[0]?.n).toBe(9);
    // 9 sends at 2 per second after a burst of 2 cannot finish in under 3.5 s of database time.
    expect(rows[0]!.last.getTime() - rows[0]!.first.getTime()).toBeGreaterThanOrEqual(3000);
  }, 60_000);
});
