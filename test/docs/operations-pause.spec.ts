import type { Type } from '@nestjs/common';

import type { AwaitResult, CappedCount, EngineService } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors } from './support/doc-example';

// Runs the "Pausing a queue" example of docs/operations-control.md exactly as the page shows it.
describe('docs/operations-control.md: pausing a queue', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module, file } = loadDocExample<{
    EmailFsm: Type<unknown>;
    pauseExample(engine: EngineService): Promise<{
      paused: boolean | undefined;
      reason: string | null | undefined;
      waiting: CappedCount | undefined;
      result: AwaitResult;
    }>;
  }>('operations-control.md', 'pause');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.EmailFsm], { queues: { emails: 2 } });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('type-checks under the strict tsconfig', () => {
    expect(typeErrors([file])).toEqual([]);
  });

  it('ends as the page says', async () => {
    expect(await module.pauseExample(t.engine)).toEqual({
      paused: true,
      reason: 'SMTP provider outage',
      waiting: { count: 1, capped: false },
      result: { kind: 'done', result: { sent: true } },
    });
  });
});
