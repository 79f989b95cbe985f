import { type DynamicModule, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

import {
  ConfigurationError,
  DurableFsm,
  EngineService,
  GenDurableModule,
  type GenDurableOptions,
  SchemaVersionError,
} from '../../lib';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §2.1, §22: forRoot / forRootAsync over every way a host provides its DataSource, and
// ConfigurationError naming the path for bad options, before any side effect.

@DurableFsm({ name: 'ping' })
class PingJob {
  perform(args: { n: number }) {
    return { pong: args.n };
  }
}

/** Boots `imports` (+ PingJob), runs one job to completion, closes. */
async function roundTrip(
  imports: NonNullable<Parameters<typeof Test.createTestingModule>[0]['imports']>,
): Promise<EngineService> {
  const app = await Test.createTestingModule({ imports, providers: [PingJob] }).compile();
  let open = true;
  trackResource('module-options app', () => open);
  try {
    await app.init();
    const engine = app.get(EngineService);
    const id = await engine.insert(PingJob, { args: { n: 7 } });
    expect(await engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { pong: 7 },
    });
    return engine;
  } finally {
    await app.close();
    open = false;
  }
}

/** The error `GenDurableModule.forRoot(options)` fails boot with. */
async function bootError(module: DynamicModule): Promise<unknown> {
  const app = await Test.createTestingModule({ imports: [module], providers: [PingJob] }).compile();
  let open = true;
  trackResource('module-options failing app', () => open);
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

describe('module and options (docs/design.md §2.1, §22)', () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = await db.dataSource();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('boots and runs', () => {
    it('forRoot with a DataSource the host built', async () => {
      const engine = await roundTrip([GenDurableModule.forRoot({ dataSource, ...FAST })]);
      expect(engine.name).toBe('GenDurable');
    });

    it("forRootAsync with @nestjs/typeorm's default DataSource (getDataSourceToken())", async () => {
      await roundTrip([
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, retryAttempts: 0 }),
        GenDurableModule.forRootAsync({
          inject: [getDataSourceToken()],
          useFactory: (ds: DataSource) => ({ dataSource: ds, ...FAST }),
        }),
      ]);
    });

    it('forRootAsync with a named @nestjs/typeorm connection', async () => {
      await roundTrip([
        TypeOrmModule.forRoot({ name: 'jobs', type: 'postgres', url: db.url, retryAttempts: 0 }),
        GenDurableModule.forRootAsync({
          inject: [getDataSourceToken('jobs')],
          useFactory: (ds: DataSource) => ({ dataSource: ds, ...FAST }),
        }),
      ]);
    });

    it('forRootAsync with a DataSource provider of a host module', async () => {
      let hostDataSource: DataSource | undefined;
      @Module({
        providers: [
          {
            provide: 'HOST_DATA_SOURCE',
            useFactory: async () => {
              hostDataSource = new DataSource({ type: 'postgres', url: db.url, poolSize: 4 });
              return hostDataSource.initialize();
            },
          },
        ],
        exports: ['HOST_DATA_SOURCE'],
      })
      class HostDatabaseModule {}
      try {
        await roundTrip([
          GenDurableModule.forRootAsync({
            imports: [HostDatabaseModule],
            inject: ['HOST_DATA_SOURCE'],
            useFactory: (ds: DataSource) => ({ dataSource: ds, ...FAST }),
          }),
        ]);
        // The host owns its DataSource: the engine's shutdown leaves it open.
        expect(hostDataSource?.isInitialized).toBe(true);
      } finally {
        await hostDataSource?.destroy();
      }
    });
  });

  describe('ConfigurationError names the path', () => {
    const bad = (options: Record<string, unknown>) =>
      GenDurableModule.forRoot({ dataSource, ...FAST, ...(options as Partial<GenDurableOptions>) });

    it.each([
      ['unknown top-level key', { bogus: 1 }, 'options.bogus'],
      ['unknown reaper key', { reaper: { interval: 100, every: 1 } }, 'reaper.every'],
      ['unknown gc key', { gc: { retention: 1, size: 2 } }, 'gc.size'],
      ['unknown flusher key', { flushers: [{ queues: 'all', wait: 1 }] }, 'flushers[0].wait'],
      ['unknown await key', { await: { tick: 5, mode: 'x' } }, 'await.mode'],
      ['negative leaseTtl', { leaseTtl: -1 }, 'leaseTtl'],
      ['non-integer pollInterval', { pollInterval: 12.5 }, 'pollInterval'],
      ['negative drainTimeout', { drainTimeout: -5 }, 'drainTimeout'],
      ['non-integer reaper interval', { reaper: { interval: 0.5 } }, 'reaper.interval'],
      ['zero maxReaps', { reaper: { maxReaps: 0 } }, 'reaper.maxReaps'],
      ['negative gc retention', { gc: { retention: -1 } }, 'gc.retention'],
      ['string prefetch', { prefetch: '3' }, 'prefetch'],
      ['heartbeat ≥ lease', { leaseTtl: 1000, heartbeatInterval: 1000 }, 'heartbeatInterval'],
      ['await tick < 1', { await: { tick: 0 } }, 'await.tick'],
      ['await: false', { await: false }, 'await'],
      ['empty flushers', { flushers: [] }, 'flushers'],
      ['uncovered queue', { queues: { a: 1, b: 1 }, flushers: [{ queues: ['a'] }] }, 'flushers'],
      ['zero concurrency', { queues: { a: 0 } }, 'queues.a'],
      ['unknown poke', { poke: 'pigeon' }, 'poke'],
      ['empty nodeId', { nodeId: '' }, 'nodeId'],
    ])('%s', async (_label, options, path) => {
      const err = await bootError(bad(options));
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as ConfigurationError).path).toBe(path);
      expect((err as Error).message).toContain(path);
    });

    it('a non-PostgreSQL DataSource', async () => {
      // CockroachDB rides on the pg driver, so this DataSource is real, just not PostgreSQL.
      const cockroach = new DataSource({
        type: 'cockroachdb',
        url: db.url,
        timeTravelQueries: false,
      });
      const err = await bootError(GenDurableModule.forRoot({ dataSource: cockroach }));
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as ConfigurationError).path).toBe('dataSource');
      expect((err as Error).message).toMatch(/PostgreSQL/);
    });

    it('a DataSource that is not initialized', async () => {
      const idle = new DataSource({ type: 'postgres', url: db.url });
      const err = await bootError(GenDurableModule.forRoot({ dataSource: idle }));
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as ConfigurationError).path).toBe('dataSource');
      expect(idle.isInitialized).toBe(false);
    });

    it('a forRootAsync factory result is validated the same way', async () => {
      const err = await bootError(
        GenDurableModule.forRootAsync({ useFactory: () => ({ dataSource, leaseTtl: 1.5 }) }),
      );
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as ConfigurationError).path).toBe('leaseTtl');
    });
  });

  describe('schema', () => {
    it('SchemaVersionError when the schema is missing; a failed boot releases the engine name', async () => {
      const empty = await createTestDatabase({ migrate: false });
      try {
        const err = await bootError(
          GenDurableModule.forRoot({ dataSource: await empty.dataSource(), ...FAST }),
        );
        expect(err).toBeInstanceOf(SchemaVersionError);
        expect(err).toMatchObject({ schema: 'public', installed: 0 });
      } finally {
        await empty.drop();
      }
      // The default name is free again: the same process boots an engine under it.
      await roundTrip([GenDurableModule.forRoot({ dataSource, ...FAST })]);
    });

    it('SchemaVersionError names a schema the migration never created', async () => {
      const err = await bootError(
        GenDurableModule.forRoot({ dataSource, schema: 'jobs', ...FAST }),
      );
      expect(err).toBeInstanceOf(SchemaVersionError);
      expect(err).toMatchObject({ schema: 'jobs', installed: 0 });
    });
  });
});
