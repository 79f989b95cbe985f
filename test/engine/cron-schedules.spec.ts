import type { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  ConfigurationError,
  done,
  DuplicateError,
  DurableCron,
  DurableFsm,
  FsmNotRegisteredError,
  GenDurableModule,
  InvalidInputError,
  ScheduleNotFoundError,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, eventually, FAST, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29: declared schedules (boot upsert, recompute only on a changed definition,
// prune), the run-time API with typed errors, `missed` after downtime, `overlap: 'skip'`,
// `state._cron`, testing `fireSchedules(at)`, and a node's ticker firing on its own.

@DurableCron('0 3 * * *', { name: 'nightly', tz: 'Europe/Berlin', state: { kind: 'full' } })
@DurableCron('*/15 * * * *', { name: 'quarterly', missed: 'once', state: () => ({ made: 'fn' }) })
@DurableFsm({ name: 'report', queue: 'cron-q' })
class ReportFsm {
  @Step() start(ctx: StepContext<Record<string, unknown>>) {
    return done({ ...ctx.state });
  }
}

@DurableFsm({ name: 'job', queue: 'cron-q' })
class JobFsm {
  @Step() start(ctx: StepContext<Record<string, unknown>>) {
    return done({ ...ctx.state });
  }
}

const QUIET = { queues: {}, reaper: false, gc: false, poke: 'none' } as const;

describe('cron schedules (docs/design.md §29)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  const schedule = async (name: string) =>
    (await db.pool.query(`SELECT * FROM gen_durable_schedules WHERE name = $1`, [name])).rows[0] as
      Record<string, unknown> | undefined;
  const instances = async (fsm: string) =>
    (
      await db.pool.query<{ key: string; state: Record<string, unknown> }>(
        `SELECT correlation_key AS key, state FROM gen_durable WHERE fsm = $1 ORDER BY id`,
        [fsm],
      )
    ).rows;

  describe('boot', () => {
    it('upserts each declared schedule once, with its next fire in its zone', async () => {
      const h = await bootEngine(db, [ReportFsm], QUIET);
      try {
        const nightly = await schedule('nightly');
        expect(nightly).toMatchObject({
          fsm: 'report',
          cron: '0 3 * * *',
          tz: 'Europe/Berlin',
          missed: 'skip',
          overlap: 'allow',
          state: { kind: 'full' },
          options: { maxCatchup: 10, queue: null, priority: 0, stateFromFunction: false },
          declared: true,
          paused: false,
          last_fire_at: null,
        });
        // 03:00 in Berlin is 01:00Z or 02:00Z depending on DST.
        const next = nightly!['next_fire_at'] as Date;
        expect([1, 2]).toContain(next.getUTCHours());
        expect(next.getUTCMinutes()).toBe(0);
        expect(next.getTime()).toBeGreaterThan(Date.now());
        expect(next.getTime()).toBeLessThanOrEqual(Date.now() + 86_400_000);
        expect((await schedule('quarterly'))?.['options']).toMatchObject({
          stateFromFunction: true,
        });
        expect((await h.engine.schedules.list()).map((s) => s.name)).toEqual([
          'nightly',
          'quarterly',
        ]);
      } finally {
        await h.close();
      }
    });

    it('keeps next_fire_at and paused across a reboot with the same definition, recomputes on a change', async () => {
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = '2026-01-01T02:00:00Z', paused = true WHERE name = 'nightly'`,
      );
      const h = await bootEngine(db, [ReportFsm], QUIET);
      await h.close();
      expect(await schedule('nightly')).toMatchObject({
        next_fire_at: new Date('2026-01-01T02:00:00Z'),
        paused: true,
      });
      // A changed definition (another expression under the same name) is rewritten.
      @DurableCron('0 4 * * *', { name: 'nightly', tz: 'Europe/Berlin', state: { kind: 'full' } })
      @DurableFsm({ name: 'report', queue: 'cron-q' })
      class ReportV2Fsm {
        @Step() start() {
          return done({});
        }
      }
      const h2 = await bootEngine(db, [ReportV2Fsm], QUIET);
      await h2.close();
      const changed = await schedule('nightly');
      expect(changed).toMatchObject({ cron: '0 4 * * *', paused: true });
      expect((changed!['next_fire_at'] as Date).getTime()).toBeGreaterThan(Date.now());
      await db.pool.query(`UPDATE gen_durable_schedules SET paused = false`);
    });

    it('keeps schedules no longer declared unless schedules.prune; never prunes run-time ones', async () => {
      const h = await bootEngine(db, [ReportFsm, JobFsm], QUIET);
      await h.engine.schedules.upsert({ name: 'adhoc', fsm: 'report', cron: '0 5 * * *' });
      await h.close();
      // JobFsm declares nothing; ReportFsm without its decorators is another class here.
      @DurableFsm({ name: 'report', queue: 'cron-q' })
      class UndecoratedReportFsm {
        @Step() start() {
          return done({});
        }
      }
      const kept = await bootEngine(db, [UndecoratedReportFsm], QUIET);
      await kept.close();
      expect(await schedule('nightly')).toBeDefined();
      const pruning = await bootEngine(db, [UndecoratedReportFsm], {
        ...QUIET,
        schedules: { prune: true },
      });
      await pruning.close();
      expect(await schedule('nightly')).toBeUndefined();
      expect(await schedule('quarterly')).toBeUndefined();
      expect(await schedule('adhoc')).toMatchObject({ declared: false });
      await db.pool.query(`DELETE FROM gen_durable_schedules`);
    });

    describe('a bad declaration fails boot with a ConfigurationError naming the schedule', () => {
      async function bootError(providers: Provider[]): Promise<unknown> {
        const app = await Test.createTestingModule({
          imports: [
            GenDurableModule.forRoot({ dataSource: await db.dataSource(), ...FAST, ...QUIET }),
          ],
          providers,
        }).compile();
        let open = true;
        trackResource('cron failing app', () => open);
        try {
          await app.init();
          return undefined;
        } catch (err) {
          return err;
        } finally {
          await app.close().catch(() => undefined);
          open = false;
        }
      }

      @DurableCron('0 3 * * * * *', { name: 'seven' })
      @DurableFsm({ name: 'bad-expr' })
      class BadExpressionFsm {
        @Step() start() {
          return done({});
        }
      }
      @DurableCron('0 3 * * *', { name: 'mars', tz: 'Mars/Olympus_Mons' })
      @DurableFsm({ name: 'bad-zone' })
      class BadZoneFsm {
        @Step() start() {
          return done({});
        }
      }
      @DurableCron('0 3 * * *', { name: 'shared' })
      @DurableFsm({ name: 'first' })
      class FirstFsm {
        @Step() start() {
          return done({});
        }
      }
      @DurableCron('0 4 * * *', { name: 'shared' })
      @DurableFsm({ name: 'second' })
      class SecondFsm {
        @Step() start() {
          return done({});
        }
      }
      @DurableCron('0 3 * * *')
      @DurableCron('0 4 * * *')
      @DurableFsm({ name: 'unnamed' })
      class UnnamedFsm {
        @Step() start() {
          return done({});
        }
      }
      @DurableCron('0 3 * * *', { name: 'often', missed: 'always' as never })
      @DurableFsm({ name: 'bad-missed' })
      class BadMissedFsm {
        @Step() start() {
          return done({});
        }
      }

      it.each([
        [
          'a 7-field expression',
          [BadExpressionFsm],
          '@DurableCron "seven" of fsm bad-expr.cron',
          /not a valid cron expression/,
        ],
        [
          'an unknown zone',
          [BadZoneFsm],
          '@DurableCron "mars" of fsm bad-zone.tz',
          /Mars\/Olympus_Mons/,
        ],
        [
          'a name declared twice',
          [FirstFsm, SecondFsm],
          '@DurableCron "shared"',
          /declared twice: on fsm first and on fsm second/,
        ],
        [
          'several without names',
          [UnnamedFsm],
          '@DurableCron #1 of fsm unnamed.name',
          /declares 2 schedules/,
        ],
        [
          'an unknown missed policy',
          [BadMissedFsm],
          '@DurableCron "often" of fsm bad-missed.missed',
          /'skip', 'once' or 'all'/,
        ],
      ] as [string, Provider[], string, RegExp][])(
        '%s',
        async (_label, providers, path, message) => {
          const err = await bootError(providers);
          expect(err).toBeInstanceOf(ConfigurationError);
          expect((err as ConfigurationError).path).toBe(path);
          expect((err as Error).message).toMatch(message);
        },
      );
    });
  });

  describe('engine.schedules at run time', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [ReportFsm, JobFsm], QUIET);
    });
    afterAll(async () => {
      await h.close();
      await db.pool.query(`DELETE FROM gen_durable_schedules; DELETE FROM gen_durable`);
    });

    it('upsert stores a schedule and recomputes its next fire only when the definition changed', async () => {
      const view = await h.engine.schedules.upsert({
        name: 'hourly',
        fsm: JobFsm,
        cron: '0 * * * *',
        state: { a: 1 },
        priority: 3,
      });
      expect(view).toMatchObject({
        name: 'hourly',
        fsm: 'job',
        tz: 'UTC',
        declared: false,
        priority: 3,
        state: { a: 1 },
      });
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = '2030-01-01T00:00:00Z' WHERE name = 'hourly'`,
      );
      const same = await h.engine.schedules.upsert({
        name: 'hourly',
        fsm: 'job',
        cron: '0 * * * *',
        state: { a: 1 },
        priority: 3,
      });
      expect(same.nextFireAt).toEqual(new Date('2030-01-01T00:00:00Z'));
      const changed = await h.engine.schedules.upsert({
        name: 'hourly',
        fsm: 'job',
        cron: '30 * * * *',
      });
      expect(changed.nextFireAt.getUTCMinutes()).toBe(30);
      expect(changed.nextFireAt.getTime()).toBeLessThan(Date.now() + 3_600_000);
    });

    it('refuses bad input with a typed error naming the field, writing nothing', async () => {
      const bad = (spec: Record<string, unknown>) =>
        h.engine.schedules.upsert({ name: 'bad', fsm: 'job', cron: '0 * * * *', ...spec });
      const path = async (p: Promise<unknown>) => {
        const err = await p.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(InvalidInputError);
        return (err as InvalidInputError).path;
      };
      expect(await path(bad({ cron: 'every day' }))).toBe('schedules.upsert.cron');
      expect(await path(bad({ tz: 'Atlantis/Capital' }))).toBe('schedules.upsert.tz');
      expect(await path(bad({ maxCatchup: 0 }))).toBe('schedules.upsert.maxCatchup');
      expect(await path(bad({ state: { _cron: 1 } }))).toBe('schedules.upsert.state');
      expect(await path(bad({ every: 'day' }))).toBe('schedules.upsert.every');
      // A name a @DurableCron schedule holds.
      expect(await path(bad({ name: 'nightly' }))).toBe('schedules.upsert.name');
      await expect(bad({ fsm: 'nope' })).rejects.toBeInstanceOf(FsmNotRegisteredError);
      expect(await schedule('bad')).toBeUndefined();
      await expect(h.engine.schedules.pause('nope')).rejects.toBeInstanceOf(ScheduleNotFoundError);
      await expect(h.engine.schedules.remove('nope')).rejects.toBeInstanceOf(ScheduleNotFoundError);
      await expect(h.engine.schedules.trigger('nope')).rejects.toBeInstanceOf(
        ScheduleNotFoundError,
      );
    });

    it('pause stops fires, resume restarts from the next occurrence after now, remove deletes', async () => {
      const gd = GenDurableTesting.forEngine(h.engine);
      await h.engine.schedules.upsert({ name: 'minutely', fsm: 'job', cron: '* * * * *' });
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = '2026-02-01T10:00:00Z' WHERE name = 'minutely'`,
      );
      expect((await h.engine.schedules.pause('minutely')).paused).toBe(true);
      expect(await gd.fireSchedules(new Date('2026-02-01T10:00:00.500Z'))).toBe(0);
      const resumed = await h.engine.schedules.resume('minutely');
      expect(resumed.paused).toBe(false);
      expect(resumed.nextFireAt.getTime()).toBeGreaterThan(Date.now());
      await h.engine.schedules.remove('minutely');
      expect(await h.engine.schedules.get('minutely')).toBeNull();
    });

    it('trigger fires once now, outside the expression; overlap skip refuses while one is live', async () => {
      await h.engine.schedules.upsert({
        name: 'single',
        fsm: 'job',
        cron: '0 0 1 1 *',
        overlap: 'skip',
        state: { n: 1 },
      });
      const before = (await h.engine.schedules.get('single'))!.nextFireAt;
      const id = await h.engine.schedules.trigger('single');
      const row = await h.engine.get(id);
      expect(row).toMatchObject({ fsm: 'job', correlationKey: 'cron:single', status: 'runnable' });
      expect(row!.state).toMatchObject({ n: 1, _cron: { missed: 0 } });
      await expect(h.engine.schedules.trigger('single')).rejects.toBeInstanceOf(DuplicateError);
      expect((await h.engine.schedules.get('single'))!.nextFireAt).toEqual(before);
    });
  });

  describe('missed occurrences after downtime (5 missed hourly fires)', () => {
    let h: Harness;
    let gd: GenDurableTesting;
    beforeAll(async () => {
      h = await bootEngine(db, [JobFsm], QUIET);
      gd = GenDurableTesting.forEngine(h.engine);
    });
    afterAll(async () => {
      await h.close();
      await db.pool.query(`DELETE FROM gen_durable_schedules; DELETE FROM gen_durable`);
    });

    // Stopped from before 00:00 until 04:30: 00:00 … 04:00 were missed; 05:00 is next.
    const AT = new Date('2026-03-01T04:30:00Z');
    async function downtime(missed: 'skip' | 'once' | 'all', maxCatchup?: number) {
      const name = `down-${missed}-${maxCatchup ?? 'default'}`;
      await h.engine.schedules.upsert({ name, fsm: 'job', cron: '0 * * * *', missed, maxCatchup });
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = '2026-03-01T00:00:00Z' WHERE name = $1`,
        [name],
      );
      h.clear();
      const fired = await gd.fireSchedules(AT);
      const rows = (await instances('job')).filter((r) => r.key.startsWith(`cron:${name}:`));
      const next = (await h.engine.schedules.get(name))!.nextFireAt;
      return { fired, rows, next, missedEvents: h.eventsOf('cron:missed') };
    }

    it('skip fires no catch-up and moves on to the next occurrence', async () => {
      const r = await downtime('skip');
      expect(r.fired).toBe(0);
      expect(r.next).toEqual(new Date('2026-03-01T05:00:00Z'));
      expect(r.missedEvents.map((e) => [e.measurements, e.metadata])).toEqual([
        [{ count: 5 }, { name: 'down-skip-default', policy: 'skip' }],
      ]);
    });

    it('once fires one instance, for the latest, with state._cron.missed = 5', async () => {
      const r = await downtime('once');
      expect(r.fired).toBe(1);
      expect(r.rows.map((x) => x.state['_cron'])).toEqual([
        { at: '2026-03-01T04:00:00.000Z', missed: 5 },
      ]);
      expect(r.next).toEqual(new Date('2026-03-01T05:00:00Z'));
    });

    it('all fires each of the 5', async () => {
      const r = await downtime('all');
      expect(r.fired).toBe(5);
      expect(r.rows.map((x) => x.state['_cron'])).toEqual(
        [0, 1, 2, 3, 4].map((hour) => ({ at: `2026-03-01T0${hour}:00:00.000Z`, missed: 0 })),
      );
    });

    it('all with maxCatchup 2 fires the latest 2, the first of them counting the 3 dropped', async () => {
      const r = await downtime('all', 2);
      expect(r.rows.map((x) => x.state['_cron'])).toEqual([
        { at: '2026-03-01T03:00:00.000Z', missed: 3 },
        { at: '2026-03-01T04:00:00.000Z', missed: 0 },
      ]);
    });

    it('an occurrence within schedules.grace of the tick is on time, not missed', async () => {
      await db.pool.query(`DELETE FROM gen_durable_schedules`);
      await h.engine.schedules.upsert({ name: 'grace', fsm: 'job', cron: '0 * * * *' });
      await db.pool.query(
        `UPDATE gen_durable_schedules SET next_fire_at = '2026-03-01T06:00:00Z' WHERE name = 'grace'`,
      );
      h.clear();
      expect(await gd.fireSchedules(new Date('2026-03-01T06:00:00.900Z'))).toBe(1);
      expect(h.eventsOf('cron:missed')).toEqual([]);
      expect(h.eventsOf('cron:fired').map((e) => [e.measurements, e.metadata])).toEqual([
        [{ count: 1 }, { name: 'grace', fsm: 'job', at: '2026-03-01T06:00:00.000Z' }],
      ]);
    });
  });

  describe('fired instances', () => {
    it('carry the declared state (or the function of the class) plus _cron, and run', async () => {
      const h = await bootEngine(db, [ReportFsm], QUIET);
      try {
        const gd = GenDurableTesting.forEngine(h.engine);
        await db.pool.query(
          `UPDATE gen_durable_schedules SET next_fire_at = '2026-04-01T01:00:00Z' WHERE name = 'nightly';
           UPDATE gen_durable_schedules SET next_fire_at = '2026-04-01T01:00:00Z' WHERE name = 'quarterly'`,
        );
        expect(await gd.fireSchedules(new Date('2026-04-01T01:00:00.200Z'))).toBe(2);
        const rows = await instances('report');
        expect(rows.map((r) => [r.key, r.state])).toEqual(
          expect.arrayContaining([
            [
              'cron:nightly:2026-04-01T01:00:00.000Z',
              { kind: 'full', _cron: { at: '2026-04-01T01:00:00.000Z', missed: 0 } },
            ],
            [
              'cron:quarterly:2026-04-01T01:00:00.000Z',
              { made: 'fn', _cron: { at: '2026-04-01T01:00:00.000Z', missed: 0 } },
            ],
          ]),
        );
        expect((await gd.drain()).done).toBe(2);
      } finally {
        await h.close();
        await db.pool.query(`DELETE FROM gen_durable_schedules; DELETE FROM gen_durable`);
      }
    });

    it("overlap 'skip' fires nothing while the previous instance is live (cron:skipped)", async () => {
      const h = await bootEngine(db, [JobFsm], QUIET);
      try {
        const gd = GenDurableTesting.forEngine(h.engine);
        await h.engine.schedules.upsert({
          name: 'lonely',
          fsm: 'job',
          cron: '* * * * *',
          overlap: 'skip',
        });
        await db.pool.query(
          `UPDATE gen_durable_schedules SET next_fire_at = '2026-04-02T00:00:00Z' WHERE name = 'lonely'`,
        );
        expect(await gd.fireSchedules(new Date('2026-04-02T00:00:00.100Z'))).toBe(1);
        h.clear();
        expect(await gd.fireSchedules(new Date('2026-04-02T00:01:00.100Z'))).toBe(0);
        expect(h.eventsOf('cron:skipped').map((e) => [e.measurements, e.metadata])).toEqual([
          [{ count: 1 }, { name: 'lonely', reason: 'overlap' }],
        ]);
        await gd.drain();
        expect(await gd.fireSchedules(new Date('2026-04-02T00:02:00.100Z'))).toBe(1);
      } finally {
        await h.close();
        await db.pool.query(`DELETE FROM gen_durable_schedules; DELETE FROM gen_durable`);
      }
    });
  });

  describe('the ticker', () => {
    it('fires an every-second schedule on its own on each of two nodes, each occurrence once', async () => {
      @DurableCron('* * * * * *', { name: 'pulse' })
      @DurableFsm({ name: 'pulse', queue: 'pulse-q' })
      class PulseFsm {
        @Step() start() {
          return done({});
        }
      }
      const nodes = [
        await bootEngine(db, [PulseFsm], { name: 'tick-a', queues: { 'pulse-q': 2 } }),
        await bootEngine(db, [PulseFsm], { name: 'tick-b', queues: { 'pulse-q': 2 } }),
      ];
      try {
        expect(nodes.every((n) => n.engine.runtime.ticker !== undefined)).toBe(true);
        const keys = async () => (await instances('pulse')).map((r) => r.key);
        await eventually(async () => (await keys()).length >= 3, 15_000);
      } finally {
        for (const n of nodes) await n.close();
      }
      const all = (await instances('pulse')).map((r) => r.key);
      expect(new Set(all).size).toBe(all.length);
      const fired = nodes.flatMap((n) => n.eventsOf('cron:fired'));
      expect(fired.reduce((sum, e) => sum + (e.measurements['count'] ?? 0), 0)).toBe(all.length);
      await db.pool.query(`DELETE FROM gen_durable_schedules; DELETE FROM gen_durable`);
    });

    it('runs on nodes that run queues or maintenance, not on a web node nor with schedules: false', async () => {
      const web = await bootEngine(db, [JobFsm], QUIET);
      const off = await bootEngine(db, [JobFsm], {
        name: 'off',
        queues: { 'cron-q': 1 },
        schedules: false,
      });
      const maintenance = await bootEngine(db, [JobFsm], {
        name: 'maint',
        queues: {},
        reaper: false,
      });
      try {
        expect(web.engine.runtime.ticker).toBeUndefined();
        expect(off.engine.runtime.ticker).toBeUndefined();
        expect(maintenance.engine.runtime.ticker).toBeDefined();
      } finally {
        await web.close();
        await off.close();
        await maintenance.close();
      }
    });
  });
});
