import { type INestApplicationContext, type LoggerService, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  Step,
  type StepContext,
} from '../../lib';
import { FAST, Gates, sleep } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §17.4: app.close() while a step runs lets the step's outcome commit, because the drain
// starts in beforeApplicationShutdown — before @nestjs/typeorm destroys the DataSource in its
// own onApplicationShutdown. No "pool closed" error, no unhandled rejection.

const gates = new Gates();

@DurableFsm({ name: 'slow', queue: 'shutdown' })
class SlowFsm {
  @Step() async start(ctx: StepContext<{ key: string }>) {
    await gates.wait(ctx.state.key);
    return done({ finished: ctx.state.key });
  }
}

class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown) {
    this.lines.push({ level: 'log', message: String(message) });
  }
  error(message: unknown, ...rest: unknown[]) {
    this.lines.push({ level: 'error', message: [message, ...rest].map(String).join(' ') });
  }
  warn(message: unknown) {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  debug() {}
  verbose() {}
}

describe('shutdown order against @nestjs/typeorm (docs/design.md §17.4)', () => {
  let db: TestDatabase;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  beforeAll(async () => {
    db = await createTestDatabase();
    process.on('unhandledRejection', onRejection);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onRejection);
    gates.openAll();
    await db.drop();
  });

  // Nest runs each shutdown phase module by module: global modules (TypeOrmCoreModule, a
  // global engine) last, in reverse registration order; non-global ones by depth. Depending on
  // where the engine sits, TypeORM's onApplicationShutdown can run before the engine's: only a
  // drain in beforeApplicationShutdown keeps the DataSource alive for the last commits.
  it.each([
    'imported after TypeORM',
    'imported before TypeORM',
    'non-global in a nested feature module',
  ])('app.close() during a running step commits its outcome first (engine %s)', async (where) => {
    const engineModule = GenDurableModule.forRootAsync({
      isGlobal: where !== 'non-global in a nested feature module',
      inject: [getDataSourceToken()],
      useFactory: (dataSource: DataSource) => ({
        dataSource,
        ...FAST,
        queues: { shutdown: 2 },
        prefetch: 2,
        drainTimeout: 20_000,
        reaper: false,
        gc: false,
      }),
    });
    @Module({ imports: [engineModule], providers: [SlowFsm], exports: [engineModule] })
    class InnerJobsModule {}
    @Module({ imports: [InnerJobsModule] })
    class JobsModule {}
    const typeorm = TypeOrmModule.forRoot({ type: 'postgres', url: db.url, retryAttempts: 0 });
    @Module({
      imports:
        where === 'imported after TypeORM'
          ? [typeorm, engineModule]
          : where === 'imported before TypeORM'
            ? [engineModule, typeorm]
            : [typeorm, JobsModule],
      providers: where === 'non-global in a nested feature module' ? [] : [SlowFsm],
    })
    class AppModule {}

    const logger = new CapturingLogger();
    const app: INestApplicationContext = await NestFactory.createApplicationContext(AppModule, {
      logger,
      abortOnError: false,
    });
    let open = true;
    trackResource('shutdown-order app', () => open);
    let closing: Promise<void> | undefined;
    try {
      const engine = app.get(EngineService);
      const dataSource = app.get<DataSource>(getDataSourceToken());
      const order: string[] = [];
      engine.events$.subscribe((e) => {
        if (e.event === 'scheduler:drain') {
          order.push(`drain(dataSource initialized: ${dataSource.isInitialized})`);
        }
        if (e.event === 'step:stop') {
          order.push(`step:stop(dataSource initialized: ${dataSource.isInitialized})`);
        }
      });
      const destroy = dataSource.destroy.bind(dataSource);
      dataSource.destroy = async () => {
        order.push('typeorm destroys the DataSource');
        return destroy();
      };

      const [a, b, c] = ['a', 'b', 'c'].map((k) => `${where}:${k}`);
      await engine.insertAll(SlowFsm, [
        { state: { key: a } },
        { state: { key: b } },
        { state: { key: c } },
      ]);
      await Promise.all([gates.reached(a!), gates.reached(b!)]);
      closing = app.close().then(() => {
        open = false;
      });
      await sleep(200); // shutdown is under way, waiting for the two in-flight steps
      expect(dataSource.isInitialized).toBe(true);
      gates.open(a!);
      gates.open(b!);
      await closing;

      expect(order).toEqual([
        'drain(dataSource initialized: true)',
        'step:stop(dataSource initialized: true)',
        'step:stop(dataSource initialized: true)',
        'typeorm destroys the DataSource',
      ]);
      const { rows } = await db.pool.query(
        `SELECT state->>'key' AS key, status, result, locked_by FROM gen_durable ORDER BY state->>'key'`,
      );
      await db.pool.query(`DELETE FROM gen_durable`);
      expect(rows).toEqual([
        { key: a, status: 'done', result: { finished: a }, locked_by: null },
        { key: b, status: 'done', result: { finished: b }, locked_by: null },
        // Buffered behind the two running steps: released at once by the drain, for another node.
        { key: c, status: 'runnable', result: null, locked_by: null },
      ]);
      const noise = logger.lines.filter(
        (l) => l.level !== 'log' || /pool|terminated|Cannot use/i.test(l.message),
      );
      expect(noise.filter((l) => !/poke 'local' and no reaper/.test(l.message))).toEqual([]);
      await sleep(50);
      expect(rejections).toEqual([]);
    } finally {
      gates.openAll();
      await (closing ?? app.close());
      open = false;
    }
  });
});
