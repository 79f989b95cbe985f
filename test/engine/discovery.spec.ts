import { Inject, Injectable, type Provider, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  ConfigurationError,
  done,
  DurableFsm,
  EngineService,
  FsmNotRegisteredError,
  GenDurableModule,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §2.2: FSM providers are found by DiscoveryService however they are registered, get
// their own dependencies injected, and invalid definitions fail boot naming the definition.

@Injectable()
class Greeting {
  readonly word = 'hello';
}

const SUFFIX = 'SUFFIX';

@DurableFsm({ name: 'by-class', queue: 'disc' })
class ByClassFsm {
  constructor(private readonly greeting: Greeting) {}
  @Step() start(ctx: StepContext<{ who: string }>) {
    return next('finish', { text: `${this.greeting.word} ${ctx.state.who}` });
  }
  @Step() finish(ctx: StepContext<{ text: string }>) {
    return done({ text: ctx.state.text });
  }
}

@DurableFsm({ name: 'by-factory', queue: 'disc' })
class ByFactoryFsm {
  constructor(
    private readonly greeting: Greeting,
    private readonly suffix: string,
  ) {}
  @Step() start() {
    return done({ text: `${this.greeting.word}${this.suffix}` });
  }
}

@DurableFsm({ name: 'by-value', queue: 'disc' })
class ByValueFsm {
  constructor(private readonly text: string) {}
  perform() {
    return { text: this.text };
  }
}

@DurableFsm({ name: 'versioned', version: 1, queue: 'disc' })
class VersionedV1 {
  @Step() start() {
    return done({ version: 1 });
  }
}

@DurableFsm({ name: 'versioned', version: 2, queue: 'disc' })
class VersionedV2 {
  @Step() start() {
    return done({ version: 2 });
  }
}

@DurableFsm({ queue: 'disc' })
class DefaultNamedFsm {
  @Step() start() {
    return done({});
  }
}

// ---- invalid definitions ----

@DurableFsm({ name: 'both' })
class StepsAndPerformFsm {
  @Step() start() {
    return done({});
  }
  perform() {
    return {};
  }
}

@DurableFsm({ name: 'empty' })
class NoStepsFsm {
  helper() {
    return 1;
  }
}

@DurableFsm({ name: 'twice' })
class DuplicateStepFsm {
  @Step('start') a() {
    return done({});
  }
  @Step('start') b() {
    return done({});
  }
}

@DurableFsm({ name: 'no-initial', initial: 'begin' })
class MissingInitialFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'dup', version: 3 })
class DupA {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'dup', version: 3 })
class DupB {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'transient-scoped' })
@Injectable({ scope: Scope.TRANSIENT })
class TransientFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'plain-scoped' })
class PlainScopedFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'inline', inlineExecution: false, maxAttempts: 0 })
class BadMaxAttemptsJob {
  perform() {
    return {};
  }
}

@DurableFsm({ name: 'bad-on-deadline', onDeadline: 'nowhere' })
class BadOnDeadlineFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'bad-deadline', deadlineMs: 0 })
class BadDeadlineJob {
  perform() {
    return {};
  }
}

@DurableFsm({ name: 'bad-grace', deadlineGraceMs: -1 })
class BadGraceJob {
  perform() {
    return {};
  }
}

describe('discovery (docs/design.md §2.2)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('finds FSMs registered by class, useFactory and useValue, each with its own dependencies', async () => {
    const providers: Provider[] = [
      Greeting,
      { provide: SUFFIX, useValue: '!' },
      ByClassFsm,
      {
        provide: ByFactoryFsm,
        useFactory: (g: Greeting, s: string) => new ByFactoryFsm(g, s),
        inject: [Greeting, SUFFIX],
      },
      { provide: 'VALUE_FSM', useValue: new ByValueFsm('from a value') },
      VersionedV1,
      VersionedV2,
      DefaultNamedFsm,
    ];
    const h = await bootEngine(db, providers, { queues: { disc: 2 }, reaper: false, gc: false });
    try {
      const terminal = async (id: string) => h.engine.await(id, { until: 'terminal' });
      expect(
        await terminal(await h.engine.insert(ByClassFsm, { state: { who: 'class' } })),
      ).toEqual({
        kind: 'done',
        result: { text: 'hello class' },
      });
      expect(await terminal(await h.engine.insert(ByFactoryFsm))).toEqual({
        kind: 'done',
        result: { text: 'hello!' },
      });
      expect(await terminal(await h.engine.insert('by-value'))).toEqual({
        kind: 'done',
        result: { text: 'from a value' },
      });
      expect(await terminal(await h.engine.insert(ByValueFsm))).toEqual({
        kind: 'done',
        result: { text: 'from a value' },
      });
      // Versions: a name resolves to the newest; a row keeps the version it started on.
      expect(await terminal(await h.engine.insert('versioned'))).toEqual({
        kind: 'done',
        result: { version: 2 },
      });
      expect(await terminal(await h.engine.insert(VersionedV1))).toEqual({
        kind: 'done',
        result: { version: 1 },
      });
      // No name: the class name is the fsm column.
      const id = await h.engine.insert(DefaultNamedFsm);
      expect(await terminal(id)).toEqual({ kind: 'done', result: {} });
      expect((await h.engine.get({ id }))?.fsm).toBe('DefaultNamedFsm');
    } finally {
      await h.close();
    }
  });

  describe('invalid definitions fail boot with a ConfigurationError naming them', () => {
    async function bootError(providers: Provider[]): Promise<unknown> {
      const app = await Test.createTestingModule({
        imports: [GenDurableModule.forRoot({ dataSource: await db.dataSource(), ...FAST })],
        providers,
      }).compile();
      let open = true;
      trackResource('discovery failing app', () => open);
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

    it.each([
      [
        'steps and perform',
        [StepsAndPerformFsm],
        'fsm both',
        /both @Step\(\) methods and perform\(\)/,
      ],
      ['no steps', [NoStepsFsm], 'fsm empty', /no @Step\(\) methods and no perform\(\)/],
      ['duplicate step names', [DuplicateStepFsm], 'fsm twice.start', /used twice/],
      [
        'missing initial step',
        [MissingInitialFsm],
        'fsm no-initial.initial',
        /"begin" does not exist/,
      ],
      [
        'duplicate (name, version)',
        [DupA, DupB],
        'fsm dup',
        /version 3 is registered twice: by class DupA and by class DupB/,
      ],
      // Request-scoped classes, providers and dependents run (test/engine/scoped-providers.spec.ts);
      // a transient one cannot: a step run needs one instance for the whole call.
      ['transient-scoped class', [TransientFsm], 'fsm TransientFsm', /transient-scoped/],
      [
        'transient-scoped provider',
        [{ provide: PlainScopedFsm, useClass: PlainScopedFsm, scope: Scope.TRANSIENT }],
        'fsm PlainScopedFsm',
        /transient-scoped/,
      ],
      ['maxAttempts < 1', [BadMaxAttemptsJob], 'fsm inline.maxAttempts', /integer ≥ 1/],
      [
        'onDeadline not a step',
        [BadOnDeadlineFsm],
        'fsm bad-on-deadline.onDeadline',
        /must name a step of the FSM \(steps: start\)/,
      ],
      ['deadlineMs < 1', [BadDeadlineJob], 'fsm bad-deadline.deadlineMs', /in 1 … /],
      ['deadlineGraceMs < 0', [BadGraceJob], 'fsm bad-grace.deadlineGraceMs', /in 0 … /],
    ] as [string, Provider[], string, RegExp][])('%s', async (_label, providers, path, message) => {
      const err = await bootError(providers);
      expect(err).toBeInstanceOf(ConfigurationError);
      expect((err as ConfigurationError).path).toBe(path);
      expect((err as Error).message).toMatch(message);
    });
  });

  describe('fsms restricts an engine to a subset', () => {
    it('registers only the listed FSMs; others are not insertable here and crash, not stop, if claimed', async () => {
      const h = await bootEngine(db, [Greeting, ByClassFsm, VersionedV1, VersionedV2], {
        queues: { disc: 2 },
        fsms: [ByClassFsm, 'versioned'],
        reaper: false,
        gc: false,
      });
      try {
        expect(
          h.engine.runtime.registry
            .all()
            .map((d) => `${d.name}@${d.version}`)
            .sort(),
        ).toEqual(['by-class@1', 'versioned@1', 'versioned@2']);
        await expect(h.engine.insert('by-factory')).rejects.toBeInstanceOf(FsmNotRegisteredError);
        await expect(h.engine.insert(ByFactoryFsm)).rejects.toBeInstanceOf(FsmNotRegisteredError);
        const { rows } = await db.pool.query<{ id: string }>(
          `INSERT INTO gen_durable (fsm, step, queue) VALUES ('by-value', 'perform', 'disc') RETURNING id`,
        );
        const crash = await h.waitFor('executor:crash', (e) => e.metadata['id'] === rows[0]!.id);
        expect(crash.metadata['error']).toMatch(/no FSM "by-value"/);
      } finally {
        await h.close();
      }
    });

    it('a listed FSM that is not a provider fails boot', async () => {
      const app = await Test.createTestingModule({
        imports: [
          GenDurableModule.forRoot({
            dataSource: await db.dataSource(),
            ...FAST,
            fsms: ['nobody'],
          }),
        ],
        providers: [Greeting, ByClassFsm],
      }).compile();
      let open = true;
      trackResource('fsms failing app', () => open);
      try {
        const err = await app.init().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ConfigurationError);
        expect((err as ConfigurationError).path).toBe('fsms');
      } finally {
        await app.close().catch(() => undefined);
        open = false;
      }
    });
  });

  it('EngineService is injectable into an FSM (an FSM may insert others)', async () => {
    @DurableFsm({ name: 'spawner', queue: 'disc' })
    class SpawnerFsm {
      constructor(@Inject(EngineService) private readonly engine: EngineService) {}
      @Step() async start() {
        const id = await this.engine.insert('by-class', { state: { who: 'spawned' } });
        return done({ spawned: id });
      }
    }
    const h = await bootEngine(db, [Greeting, ByClassFsm, SpawnerFsm], {
      queues: { disc: 2 },
      reaper: false,
      gc: false,
    });
    try {
      const r = await h.engine.await(await h.engine.insert(SpawnerFsm), { until: 'terminal' });
      expect(r.kind).toBe('done');
      const spawned = r.kind === 'done' ? String(r.result['spawned']) : '';
      expect(await h.engine.await(spawned, { until: 'terminal' })).toEqual({
        kind: 'done',
        result: { text: 'hello spawned' },
      });
    } finally {
      await h.close();
    }
  });
});
