import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { Controller, Get, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';

import {
  DurableFsm,
  EngineService,
  GenDurableModule,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableHealthIndicator, GenDurableHealthModule } from '../../lib/health';
import { eventually, FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

@DurableFsm({ name: 'health-spin' })
class SpinFsm {
  @Step() start(ctx: StepContext<{ blockMs?: number }>) {
    const until = Date.now() + (ctx.state.blockMs ?? 0);
    while (Date.now() < until) {
      // a CPU-bound step: blocks the event loop
    }
    return next('start', { blockMs: 0 });
  }
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly gd: GenDurableHealthIndicator,
  ) {}

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.gd.schedulerLiveness('schedulers')]);
  }

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([
      () => this.gd.leaseBacklog('leases', { graceMs: 0 }),
      () => this.gd.runnableBacklog('queues', { queues: ['default', 'orphan'], maxAgeMs: 500 }),
    ]);
  }
}

describe('health (Terminus)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let engine: EngineService;
  let indicator: GenDurableHealthIndicator;
  let open = false;

  beforeAll(async () => {
    db = await createTestDatabase();
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          ...FAST,
          reaper: false,
          heartbeatInterval: 300,
          leaseTtl: 1000,
        }),
        GenDurableHealthModule.forFeature(),
      ],
      controllers: [HealthController],
      providers: [SpinFsm],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    open = true;
    trackResource('health app', () => open);
    engine = app.get(EngineService);
    indicator = app.get(GenDurableHealthIndicator);
  });
  afterAll(async () => {
    if (open) await app.close();
    open = false;
    await db.drop();
  });

  it('is up on a healthy engine', async () => {
    const res = await request(app.getHttpServer()).get('/health/live');
    expect(res.status).toBe(200);
    expect(res.body.info.schedulers).toMatchObject({ status: 'up', schedulers: 1 });
  });

  it('leaseBacklog goes down when leases expire with no reaper, and up once a reaper runs', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, status, locked_by, lease_expires_at) VALUES ('ghost', 'start', 'executing', 'dead-worker', now() - interval '1 minute')`,
    );
    const down = await request(app.getHttpServer()).get('/health/ready');
    expect(down.status).toBe(503);
    expect(down.body.error.leases).toMatchObject({ status: 'down', expiredLeases: 1 });
    // a reaper (here: one sweep of this engine's reaper machinery run by a maintenance node) heals it
    const { Reaper } = await import('../../lib/runtime/reaper');
    const reaper = new Reaper(
      engine.runtime.sql,
      1000,
      5,
      engine.runtime.telemetry,
      () => undefined,
      () => undefined,
    );
    expect(await reaper.sweep()).toMatchObject({ reaped: 1 });
    await db.pool.query(`DELETE FROM gen_durable WHERE fsm = 'ghost'`);
    expect((await indicator.leaseBacklog('leases', { graceMs: 0 })).leases).toMatchObject({
      status: 'up',
      expiredLeases: 0,
    });
  });

  it('runnableBacklog goes down when a queue has no scheduler', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at) VALUES ('health-spin', 'start', 'orphan', now() - interval '1 second')`,
    );
    const res = await request(app.getHttpServer()).get('/health/ready');
    expect(res.status).toBe(503);
    expect(res.body.details.queues.status).toBe('down');
    expect(res.body.details.queues.queues.orphan).toMatchObject({ depth: 1 });
    expect(res.body.details.queues.queues.orphan.headAgeMs).toBeGreaterThan(500);
    await db.pool.query(`DELETE FROM gen_durable WHERE queue = 'orphan'`);
  });

  it('a check whose query outlasts timeoutMs answers down with the timeout error, without waiting for the query', async () => {
    // An ACCESS EXCLUSIVE lock held by another session blocks every read of gen_durable.
    const locker = await db.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE gen_durable IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      const [leases, queues] = await Promise.all([
        indicator.leaseBacklog('leases', { graceMs: 0, timeoutMs: 300 }),
        indicator.runnableBacklog('queues', { queues: ['default'], timeoutMs: 300 }),
      ]);
      const elapsed = Date.now() - started;
      expect(leases['leases']).toEqual({
        status: 'down',
        error: 'health check timed out after 300 ms',
      });
      expect(queues['queues']).toEqual({
        status: 'down',
        error: 'health check timed out after 300 ms',
      });
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(5_000); // the lock is still held: nothing waited for it
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    expect((await indicator.leaseBacklog('leases', { graceMs: 0 }))['leases']).toMatchObject({
      status: 'up',
    });
  });

  it('schedulerLiveness goes down during and right after an event-loop stall', async () => {
    const id = await engine.insert(SpinFsm, { state: { blockMs: 900 } });
    await eventually(async () => (await engine.get({ id }))?.state['blockMs'] === 0);
    const result = indicator.schedulerLiveness('schedulers');
    expect(result['schedulers']).toMatchObject({ status: 'down' });
    expect(JSON.stringify(result)).toMatch(/event loop stalled/);
  });

  it('schedulerLiveness goes down while draining', async () => {
    const drain = engine.runtime.drain();
    const result = indicator.schedulerLiveness('schedulers');
    expect(result['schedulers']).toMatchObject({ status: 'down' });
    expect(JSON.stringify(result)).toMatch(/draining|stopped/);
    await drain;
    const res = await request(app.getHttpServer()).get('/health/live');
    expect(res.status).toBe(503);
    await app.close();
    open = false;
  });

  it('only lib/health imports @nestjs/terminus (apps without it never load it)', () => {
    const root = join(__dirname, '..', '..', 'lib');
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) {
          if (name !== 'health') walk(path);
        } else if (
          name.endsWith('.ts') &&
          readFileSync(path, 'utf8').includes('@nestjs/terminus')
        ) {
          offenders.push(path);
        }
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});
