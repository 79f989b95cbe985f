import { Injectable, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import * as first from '../../lib';
import { RunningEngines } from '../../lib/engine/running-engines';

// docs/design.md §34: the package ships a CommonJS and an ES-module build, and one process can
// load both (an ESM app whose dependency `require`s gen-durable). Here a second copy of lib/ is
// loaded into an isolated module registry beside the first, sharing the peers (NestJS, TypeORM,
// pg) as the two builds do: the copies must share one engine-name registry and one set of tokens,
// and the default engine must be injectable by either copy's `EngineService`. The packed builds
// themselves are exercised the same way by `npm run compat` (scripts/compat).

type Lib = typeof first;
type Registry = typeof RunningEngines;

function loadSecondCopy(): { lib: Lib; running: Registry } {
  const peers = ['@nestjs/common', '@nestjs/core', 'typeorm', 'pg', 'rxjs', 'reflect-metadata'];
  const loaded = new Map(peers.map((name) => [name, jest.requireActual<object>(name)]));
  let copy: { lib: Lib; running: Registry } | undefined;
  jest.isolateModules(() => {
    for (const [name, mod] of loaded) jest.doMock(name, () => mod);
    copy = {
      lib: jest.requireActual<Lib>('../../lib'),
      running: jest.requireActual<{ RunningEngines: Registry }>('../../lib/engine/running-engines')
        .RunningEngines,
    };
  });
  if (!copy) throw new Error('the second copy did not load');
  return copy;
}

describe('two copies of the package in one process (docs/design.md §34)', () => {
  const second = loadSecondCopy();

  it('are really two copies: two EngineService classes', () => {
    expect(second.lib.EngineService).not.toBe(first.EngineService);
    expect(second.running).not.toBe(RunningEngines);
  });

  it('share the running-engine registry: a name started by one is refused by the other', () => {
    RunningEngines.acquire('dual-package-probe');
    try {
      expect(second.running.names()).toContain('dual-package-probe');
      expect(() => second.running.acquire('dual-package-probe')).toThrow(
        second.lib.AlreadyStartedError,
      );
    } finally {
      RunningEngines.release('dual-package-probe');
    }
    expect(second.running.names()).not.toContain('dual-package-probe');
  });

  it('compute the same tokens', () => {
    expect(second.lib.getEngineToken()).toBe(first.getEngineToken());
    expect(second.lib.getEngineToken('Billing')).toBe(first.getEngineToken('Billing'));
  });

  it('inject the one default engine, by token or by either copy’s class', async () => {
    const SecondEngineService = second.lib.EngineService as unknown as Type;

    // A provider of "the dependency", written against the second copy.
    @Injectable()
    class DependencyService {
      constructor(
        @second.lib.InjectEngine() readonly byToken: unknown,
        @second.lib.InjectEngine('Billing') readonly billing: unknown,
      ) {}
    }
    Reflect.defineMetadata('design:paramtypes', [Object, Object], DependencyService);

    @Injectable()
    class ByClass {
      constructor(readonly engine: unknown) {}
    }
    Reflect.defineMetadata('design:paramtypes', [SecondEngineService], ByClass);

    // The app registers its engines with the first copy. Options are only validated at init;
    // compiling wires the providers without a database.
    const moduleRef = await Test.createTestingModule({
      imports: [
        first.GenDurableModule.forRoot({ dataSource: {} as never }),
        first.GenDurableModule.forRoot({ name: 'Billing', dataSource: {} as never }),
      ],
      providers: [DependencyService, ByClass],
    }).compile();

    // (By token: both modules hold an EngineService provider, only the default exports it.)
    const engine = moduleRef.get<first.EngineService>(first.getEngineToken());
    expect(engine).toBeInstanceOf(first.EngineService);
    expect(engine.name).toBe('GenDurable');
    expect(moduleRef.get(DependencyService).byToken).toBe(engine);
    expect(moduleRef.get(ByClass).engine).toBe(engine);
    expect(moduleRef.get(SecondEngineService)).toBe(engine);
    const billing = moduleRef.get<first.EngineService>(first.getEngineToken('Billing'));
    expect(billing.name).toBe('Billing');
    expect(moduleRef.get(DependencyService).billing).toBe(billing);
  });
});
