import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';

import { CURRENT_SCHEMA_VERSION } from '../../lib/schema/increments';
import { EngineService } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { AppModule } from '../../sample/app.module';
import { DEMO_DASHBOARD_TOKEN } from '../../sample/dashboard/demo-dashboard.guard';
import { eventually } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The sample boots on an empty database: TypeORM runs the gen-durable migration at boot and
// the app answers HTTP (what `npm run sample` and the NestJS 12 smoke rely on).
describe('sample app', () => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  const previousUrl = process.env['DATABASE_URL'];

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    process.env['DATABASE_URL'] = db.url;
    app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await app.listen(0);
  });

  afterAll(async () => {
    await app?.close();
    if (previousUrl === undefined) {
      delete process.env['DATABASE_URL'];
    } else {
      process.env['DATABASE_URL'] = previousUrl;
    }
    await db.drop();
  });

  it('answers GET / with its name', async () => {
    const response = await request(app!.getHttpServer()).get('/').expect(200);
    expect(response.body).toEqual({ name: 'gen-durable sample', ok: true });
  });

  it('ran the gen-durable migration at boot', async () => {
    const { rows } = await db.pool.query<{ version: string | null }>(
      `SELECT obj_description('public.gen_durable'::regclass, 'pg_class') AS version`,
    );
    expect(Number(rows[0]?.version)).toBe(CURRENT_SCHEMA_VERSION);
    const migrations = await db.pool.query<{ name: string }>('SELECT name FROM migrations');
    expect(migrations.rows.map((r) => r.name)).toEqual([
      'SetupGenDurable1700000000000',
      'CreateSampleOrders1700000000001',
    ]);
  });

  it('serves the Terminus health endpoints', async () => {
    const live = await request(app!.getHttpServer()).get('/health/live').expect(200);
    expect(live.body.info.schedulers).toMatchObject({ status: 'up', schedulers: 3 });
    const ready = await request(app!.getHttpServer()).get('/health/ready').expect(200);
    expect(ready.body.info).toMatchObject({ leases: { status: 'up' }, queues: { status: 'up' } });
  });

  it('opens the printed dashboard URL on a first visit: the token cookie and the CSRF cookie both set, the assets served with that cookie', async () => {
    const server = app!.getHttpServer();
    const first = await request(server).get(`/durable?token=${DEMO_DASHBOARD_TOKEN}`).expect(200);
    const raw = first.headers['set-cookie'] as unknown;
    const cookies = (Array.isArray(raw) ? raw : [raw]).map(String);
    const token = `sample_dashboard_token=${DEMO_DASHBOARD_TOKEN}`;
    expect(cookies.some((c) => c.startsWith(`${token};`))).toBe(true);
    expect(cookies.some((c) => c.startsWith('gd_dashboard_csrf='))).toBe(true);
    for (const asset of ['/durable/assets/dashboard.css', '/durable/assets/htmx.min.js']) {
      await request(server).get(asset).set('cookie', token).expect(200);
    }
    await request(server).get('/durable/queues').set('cookie', token).expect(200);
    await request(server).get('/durable/assets/dashboard.css').expect(403);
  });

  it('declares the nightly report (03:00 Berlin) and runs it when its time comes', async () => {
    const engine = app!.get(EngineService);
    const nightly = await engine.schedules.get('nightly-report');
    expect(nightly).toMatchObject({
      cron: '0 3 * * *',
      tz: 'Europe/Berlin',
      fsm: 'nightly-report',
      missed: 'once',
      declared: true,
    });
    // What the first node whose clock reaches 03:00 does; the sample's queues run the job.
    const at = nightly!.nextFireAt;
    expect(await GenDurableTesting.forEngine(engine).fireSchedules(at)).toBe(1);
    const key = `cron:nightly-report:${at.toISOString()}`;
    const done = await eventually(async () => {
      const row = await engine.get({ correlationKey: key });
      return row?.status === 'done' ? row : undefined;
    }, 15_000);
    expect(done.result).toEqual({ at: at.toISOString(), orders: 0, emails: 0 });
  });
});
