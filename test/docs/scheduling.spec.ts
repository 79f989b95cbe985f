import type { Type } from '@nestjs/common';

import type { EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample } from './support/doc-example';

// Runs the example of docs/scheduling.md exactly as the page shows it.
describe('docs/scheduling.md example', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module } = loadDocExample<{
    NotificationFsm: Type<unknown>;
    sent: string[];
    example(engine: EngineService): Promise<string[]>;
  }>('scheduling.md');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.NotificationFsm], { queues: { notifications: 1 } });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('ends as the page says', async () => {
    expect(await module.example(t.engine)).toEqual([
      'password reset',
      'receipt',
      'newsletter',
      'reminder',
    ]);
  });
});
