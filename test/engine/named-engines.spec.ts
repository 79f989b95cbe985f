import { Injectable, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';

import {
  AlreadyStartedError,
  done,
  DurableFsm,
  EngineService,
  FsmNotRegisteredError,
  type GenDurableEvent,
  GenDurableModule,
  getEngineToken,
  InjectEngine,
  Step,
  type StepContext,
} from '../../lib';
import { subscribeChannels } from '../support/channel-subscription';
import { FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §2.1, §19: several engines per process by name; tokens from getEngineToken; a name
// already running fails with AlreadyStartedError and is released at shutdown.

@DurableFsm({ name: 'order', queue: 'main' })
class OrderFsm {
  @Step() start(ctx: StepContext) {
    return done({ engine: 'main', id: ctx.id });
  }
}

@DurableFsm({ name: 'invoice', queue: 'billing' })
class InvoiceFsm {
  @Step() start(ctx: StepContext) {
    return done({ engine: 'billing', id: ctx.id });
  }
}

@Injectable()
class Consumer {
  constructor(
    readonly main: EngineService,
    @InjectEngine() readonly injectedDefault: EngineService,
    @InjectEngine('Billing') readonly billing: EngineService,
  ) {}
}

describe('named engines (docs/design.md §2.1)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  async function twoEngineApp(billingName = 'Billing'): Promise<TestingModule> {
    const dataSource = await db.dataSource();
    const app = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({ dataSource, ...FAST, queues: { main: 2 }, fsms: [OrderFsm] }),
        GenDurableModule.forRootAsync({
          name: billingName,
          useFactory: () => ({ dataSource, ...FAST, queues: { billing: 2 }, fsms: [InvoiceFsm] }),
        }),
      ],
      providers: [OrderFsm, InvoiceFsm, Consumer],
    }).compile();
    return app;
  }

  it('runs a default and a named engine side by side, each injectable by its token', async () => {
    const app = await twoEngineApp();
    let open = true;
    trackResource('two-engine app', () => open);
    const published: GenDurableEvent[] = [];
    const onStep = (message: unknown) => published.push(message as GenDurableEvent);
    const subscription = await subscribeChannels(['gen_durable:step:stop'], onStep);
    try {
      await app.init();
      const consumer = app.get(Consumer);
      expect(consumer.main.name).toBe('GenDurable');
      expect(consumer.injectedDefault).toBe(consumer.main);
      expect(consumer.billing.name).toBe('Billing');
      expect(consumer.billing).not.toBe(consumer.main);
      expect(app.get(getEngineToken('Billing'))).toBe(consumer.billing);
      // Tokens are strings, the same in either build of the package; the default engine is
      // also provided under its class (above: `main`).
      expect(getEngineToken()).toBe('GenDurableEngine:GenDurable');
      expect(getEngineToken('GenDurable')).toBe('GenDurableEngine:GenDurable');
      expect(app.get(getEngineToken())).toBe(consumer.main);

      // Each engine runs its own queue with its own FSM subset and worker ids.
      expect([...consumer.main.runtime.schedulers.keys()]).toEqual(['main']);
      expect([...consumer.billing.runtime.schedulers.keys()]).toEqual(['billing']);
      expect(consumer.billing.runtime.schedulers.get('billing')?.workerId).toMatch(
        /^Billing:billing@/,
      );
      const order = await consumer.main.insert(OrderFsm);
      const invoice = await consumer.billing.insert(InvoiceFsm);
      expect(await consumer.main.await(order, { until: 'terminal' })).toEqual({
        kind: 'done',
        result: { engine: 'main', id: order },
      });
      expect(await consumer.billing.await(invoice, { until: 'terminal' })).toEqual({
        kind: 'done',
        result: { engine: 'billing', id: invoice },
      });
      await expect(consumer.billing.insert(OrderFsm)).rejects.toBeInstanceOf(FsmNotRegisteredError);
      // Telemetry carries the engine name on both transports.
      expect(published.filter((e) => e.metadata['id'] === order).map((e) => e.engine)).toEqual([
        'GenDurable',
      ]);
      expect(published.filter((e) => e.metadata['id'] === invoice).map((e) => e.engine)).toEqual([
        'Billing',
      ]);
    } finally {
      subscription.unsubscribe();
      await app.close();
      open = false;
    }
  });

  it('a look-up by class (app.get(EngineService)) answers the default engine whatever the order; named-only apps say which token to use', async () => {
    const dataSource = await db.dataSource();
    const named = (name: string, isGlobal?: boolean) =>
      GenDurableModule.forRoot({ dataSource, ...FAST, queues: {}, name, isGlobal });
    const byDefault = GenDurableModule.forRoot({ dataSource, ...FAST, queues: {} });

    @Injectable()
    class FeatureConsumer {
      constructor(
        readonly byClass: EngineService,
        @InjectEngine('Feature') readonly feature: EngineService,
      ) {}
    }
    @Module({ imports: [named('Feature', false)], providers: [FeatureConsumer] })
    class FeatureModule {}

    for (const imports of [
      [byDefault, named('Billing')],
      [named('Billing'), byDefault],
      [named('Billing'), byDefault, FeatureModule, named('Audit')],
    ]) {
      const app = await Test.createTestingModule({ imports }).compile();
      try {
        const engine = app.get(EngineService);
        expect(engine.name).toBe('GenDurable');
        expect(app.get(EngineService, { strict: false })).toBe(engine);
        expect(app.get(getEngineToken())).toBe(engine);
        expect(app.get<EngineService>(getEngineToken('Billing')).name).toBe('Billing');
        if (imports.includes(FeatureModule)) {
          const consumer = app.get(FeatureConsumer);
          expect(consumer.byClass).toBe(engine);
          expect(consumer.feature.name).toBe('Feature');
          expect(app.select(FeatureModule).get(EngineService)).toBe(engine);
        }
      } finally {
        await app.close();
      }
    }

    const namedOnly = await Test.createTestingModule({ imports: [named('Billing')] }).compile();
    try {
      // Nest's own UnknownElementException: no provider is keyed by the class (docs/design.md §2.1).
      expect(() => namedOnly.get(EngineService)).toThrow(
        'Nest could not find EngineService element (this provider does not exist in the current context)',
      );
      expect(namedOnly.get<EngineService>(getEngineToken('Billing')).name).toBe('Billing');
    } finally {
      await namedOnly.close();
    }
  });

  it('a second engine with a running name fails with AlreadyStartedError; the name is released at shutdown', async () => {
    const first = await twoEngineApp();
    let firstOpen = true;
    trackResource('first app', () => firstOpen);
    await first.init();
    try {
      // Twice: a refused boot must not release the running engine's name either.
      for (const attempt of [1, 2]) {
        const second = await Test.createTestingModule({
          imports: [
            GenDurableModule.forRootAsync({
              name: 'Billing',
              useFactory: async () => ({ dataSource: await db.dataSource(), ...FAST, queues: {} }),
            }),
          ],
          providers: [InvoiceFsm],
        }).compile();
        let secondOpen = true;
        trackResource(`second app #${attempt}`, () => secondOpen);
        const err = await second.init().then(
          () => undefined,
          (e: unknown) => e,
        );
        await second.close().catch(() => undefined);
        secondOpen = false;
        expect(err).toBeInstanceOf(AlreadyStartedError);
        expect(err).toMatchObject({ engineName: 'Billing', code: 'GD_ALREADY_STARTED' });
      }
      // The running engine is unaffected.
      const billing = first.get<EngineService>(getEngineToken('Billing'));
      const id = await billing.insert(InvoiceFsm);
      expect((await billing.await(id, { until: 'terminal' })).kind).toBe('done');
    } finally {
      await first.close();
      firstOpen = false;
    }
    // Released: the same names boot again in this process.
    const again = await twoEngineApp();
    let againOpen = true;
    trackResource('third app', () => againOpen);
    try {
      await again.init();
      expect(again.get<EngineService>(getEngineToken('Billing')).name).toBe('Billing');
    } finally {
      await again.close();
      againOpen = false;
    }
  });
});
