import { Test } from '@nestjs/testing';

import { done, DurableFsm, EngineService, GenDurableModule, Step } from '../../lib';
import { GenDurableHealthIndicator, GenDurableHealthModule } from '../../lib/health';
import { GenDurableTesting } from '../../lib/testing';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29, docs/health.md: scheduleLag is down while an un-paused schedule's next
// fire lies further in the past than maxLagMs (nobody fires it), up again once it fired.

@DurableFsm({ name: 'lagging', queue: 'lag-q' })
class LaggingFsm {
  @Step() start() {
    return done({});
  }
}

describe('health scheduleLag (docs/design.md §29)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('is down while a schedule is overdue past maxLagMs, up once it fired or is paused', async () => {
    const app = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: await db.dataSource(),
          ...FAST,
          queues: {},
          reaper: false,
          gc: false,
          schedules: { interval: 10_000 },
        }),
        GenDurableHealthModule.forFeature(),
      ],
      providers: [LaggingFsm],
    }).compile();
    await app.init();
    let open = true;
    trackResource('schedule lag app', () => open);
    try {
      const engine = app.get(EngineService);
      const indicator = app.get(GenDurableHealthIndicator);
      expect(await indicator.scheduleLag('cron')).toEqual({
        cron: { status: 'up', lagMs: 0, oldest: null, overdue: 0, maxLagMs: 20_000 },
      });
      await engine.schedules.upsert({ name: 'late', fsm: 'lagging', cron: '* * * * *' });
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = now() - interval '5 minutes' WHERE name = 'late'`,
      );
      const down = await indicator.scheduleLag('cron', { maxLagMs: 60_000 });
      expect(down['cron']).toMatchObject({ status: 'down', oldest: 'late', overdue: 1 });
      expect(down['cron']!['lagMs']).toBeGreaterThanOrEqual(300_000);
      // Paused: not lagging.
      await engine.schedules.pause('late');
      expect((await indicator.scheduleLag('cron'))['cron']).toMatchObject({ status: 'up' });
      await db.pool.query(`UPDATE gen_durable_schedules SET paused = false`);
      expect((await indicator.scheduleLag('cron'))['cron']).toMatchObject({ status: 'down' });
      // Fired (skip: the missed ones are dropped, the next one lies ahead): up.
      await GenDurableTesting.forEngine(engine).fireSchedules();
      expect((await indicator.scheduleLag('cron'))['cron']).toMatchObject({
        status: 'up',
        overdue: 0,
      });
    } finally {
      await app.close();
      open = false;
    }
  });
});
