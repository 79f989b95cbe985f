import type { Type } from '@nestjs/common';

import type { EngineService, InstanceCount } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors } from './support/doc-example';

// Runs the "Finding instances" example of docs/operations-control.md exactly as the page shows it.
describe('docs/operations-control.md: finding instances', () => {
  let db: TestDatabase;
  let t: Harness;
  const { module, file } = loadDocExample<{
    InvoiceFsm: Type<unknown>;
    findExample(engine: EngineService): Promise<{ keys: string[]; count: InstanceCount }>;
  }>('operations-control.md', 'find');
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [module.InvoiceFsm], { queues: { invoices: 4 } });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('type-checks under the strict tsconfig', () => {
    expect(typeErrors([file])).toEqual([]);
  });

  it('ends as the page says', async () => {
    expect(await module.findExample(t.engine)).toEqual({
      keys: [
        'invoice:2024-4',
        'invoice:2024-3',
        'invoice:2024-2',
        'invoice:2024-1',
        'invoice:2024-0',
      ],
      count: { count: 3, capped: true, exact: true },
    });
  });
});
