import type { Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { EngineService, GenDurableModule } from '../../lib';
import type { DrainTally } from '../../lib/testing';
import { bootEngine, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/operations-control.md exactly as the page shows it.
describe('docs/operations-control.md example', () => {
  let db: TestDatabase;
  const { module, source } = loadDocExample<{
    TrialFsm: Type<unknown>;
    log: string[];
    example(engine: EngineService): Promise<string[]>;
    exampleInTest(engine: EngineService): Promise<DrainTally[]>;
  }>('operations-control.md');
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('ends as the page says on a node running the queue', async () => {
    const t: Harness = await bootEngine(db, [module.TrialFsm], { queues: { trials: 1 } });
    try {
      expect(await module.example(t.engine)).toEqual([
        'welcome ada',
        'remind timed out after 1000 ms',
        'reminded ada',
        'trial ended',
      ]);
      expect(source).toContain(
        `// → ['welcome ada', 'remind timed out after 1000 ms', 'reminded ada', 'trial ended']`,
      );
      expect(t.eventsOf('step:abort').map((e) => e.metadata['cause'])).toEqual(['timeout']);
    } finally {
      await t.close();
    }
  });

  it('drains as the page says on a web node', async () => {
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
      providers: [module.TrialFsm],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('operations-control testing module', () => open);
    try {
      const [first, rest] = await module.exampleInTest(moduleRef.get(EngineService));
      expect(first).toMatchObject({ steps: 1, sleep: 1, done: 0 });
      expect(rest).toMatchObject({ steps: 3, retry: 1, sleep: 1, done: 1 });
      expect(source).toContain('// { steps: 1, sleep: 1, … }');
    } finally {
      await moduleRef.close();
      open = false;
    }
  });
});
