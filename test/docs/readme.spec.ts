import type { Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { type AwaitResult, EngineService, GenDurableModule } from '../../lib';
import type { DrainTally } from '../../lib/testing';
import { bootEngine, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors } from './support/doc-example';

type ReadmeExample = {
  CheckoutFsm: Type<unknown>;
  example(engine: EngineService): Promise<AwaitResult>;
  exampleInTest(engine: EngineService): Promise<DrainTally>;
};

// Runs README.md's "A first FSM" block exactly as the page shows it.
describe('README.md first FSM', () => {
  let db: TestDatabase;
  const { module, source, file } = loadDocExample<ReadmeExample>('../README.md');
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('type-checks under the strict tsconfig', () => {
    expect(typeErrors([file])).toEqual([]);
  });

  it('runs with schedulers and answers as the page says', async () => {
    const t: Harness = await bootEngine(db, [module.CheckoutFsm]);
    try {
      expect(await module.example(t.engine)).toEqual({
        kind: 'done',
        result: { orderId: 'o-1', paid: true },
      });
      expect(source).toContain(`// → { kind: 'done', result: { orderId: 'o-1', paid: true } }`);
    } finally {
      await t.close();
    }
  });

  it('runs inline through gen-durable/testing on a web node', async () => {
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource,
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
        }),
      ],
      providers: [module.CheckoutFsm],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('readme testing module', () => open);
    try {
      expect(await module.exampleInTest(moduleRef.get(EngineService))).toMatchObject({
        steps: 2,
        next: 1,
        await: 1,
      });
    } finally {
      await moduleRef.close();
      open = false;
    }
  });
});
