import type { Type } from '@nestjs/common';

import type { AwaitResult, EngineService } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors, writeDocExample } from './support/doc-example';

type Bulk = { matched: number; changed: number };

// Runs the "Bulk actions", "Forking" and "Progress" examples of docs/operations-control.md
// exactly as the page shows them, and type-checks them.
describe('docs/operations-control.md: bulk actions, fork, progress', () => {
  let db: TestDatabase;
  const bulk = loadDocExample<{
    SyncFsm: Type<unknown>;
    bulkExample(engine: EngineService): Promise<{ preview: Bulk; retried: Bulk; cancelled: Bulk }>;
  }>('operations-control.md', 'bulk');
  const fork = loadDocExample<{
    ImportFsm: Type<unknown>;
    forkExample(engine: EngineService): Promise<{ answer: AwaitResult; forkedFromSource: boolean }>;
  }>('operations-control.md', 'fork');
  const progress = loadDocExample<{ BackfillFsm: Type<unknown>; copied: number[] }>(
    'operations-control.md',
    'progress',
  );

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('on a node running the queues', () => {
    let t: Harness;
    beforeAll(async () => {
      t = await bootEngine(db, [bulk.module.SyncFsm, fork.module.ImportFsm], {
        queues: { syncs: 4, imports: 1 },
      });
    });
    afterAll(async () => {
      await t.close();
    });

    it('previews, retries later and cancels the failed syncs, as the page says', async () => {
      expect(await bulk.module.bulkExample(t.engine)).toEqual({
        preview: { matched: 3, changed: 0 },
        retried: { matched: 3, changed: 3 },
        cancelled: { matched: 3, changed: 3 },
      });
      expect(bulk.source).toContain(`//     cancelled: { matched: 3, changed: 3 } }`);
    });

    it('forks the failed import with the fix, as the page says', async () => {
      expect(await fork.module.forkExample(t.engine)).toEqual({
        answer: { kind: 'done', result: { file: 'q3.csv', delimiter: ';' } },
        forkedFromSource: true,
      });
      expect(fork.source).toContain(
        `// → { answer: { kind: 'done', result: { file: 'q3.csv', delimiter: ';' } },`,
      );
    });
  });

  it('a retried backfill resumes at the stored progress', async () => {
    const t = await bootEngine(db, [progress.module.BackfillFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    try {
      const gd = GenDurableTesting.forEngine(t.engine);
      const id = await t.engine.insert(progress.module.BackfillFsm, { state: { total: 400 } });
      const draining = gd.drain();
      await eventually(async () => progress.module.copied.length >= 5);
      expect(await gd.heartbeat()).toBe(1);
      const stored = (await t.engine.get(id))?.progress as { next: number; of: number };
      expect(stored.of).toBe(400);
      expect(stored.next).toBeGreaterThanOrEqual(5);
      await t.engine.cancel(id, { mode: 'fence' });
      await draining; // its late outcome is stale: the row stays cancelled
      expect((await t.engine.get(id))?.status).toBe('cancelled');
      progress.module.copied.length = 0;
      await t.engine.retry(id);
      await gd.drain();
      expect(progress.module.copied[0]).toBe(stored.next);
      await gd.assertDone(id, { copied: 400 - stored.next });
    } finally {
      await t.close();
    }
  });

  it('compiles under the strict tsconfig', () => {
    const files = ['bulk', 'fork', 'progress'].map(
      (name) => writeDocExample('operations-control.md', name).file,
    );
    expect(typeErrors(files)).toEqual([]);
  }, 120_000);
});
