import { DurableFsm, done, InvalidInputError, Step } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { countTagged, installInsertFaults } from './support/insert-faults';

@DurableFsm({ name: 'batched_job' })
class BatchedFsm {
  @Step() start() {
    return done({ ok: true });
  }
}

async function doneTagged(db: TestDatabase, tag: string): Promise<number> {
  const rows = (
    await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM gen_durable WHERE state->>'tag' = $1 AND status = 'done'`,
      [tag],
    )
  ).rows;
  return Number(rows[0]?.n ?? 0);
}

// docs/design.md §6.5: insertAsync is the lossy mirror — it resolves at once, the batcher writes one
// INSERT_INSTANCES per trigger and pokes; backpressure and a missing batcher fall back to a
// durable insert; a failed batch is dropped with insert_batch:error; shutdown drains.
describe('insert batcher (insertAsync)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await installInsertFaults(db);
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('on a worker node', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [BatchedFsm], {
        insertBatcher: { maxBatch: 100, maxDelayMs: 50, maxBuffer: 1000 },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('resolves before anything is written, then one statement per trigger, then the rows run', async () => {
      h.clear();
      for (let i = 0; i < 30; i++) {
        await h.engine.insertAsync(BatchedFsm, { state: { tag: 'trigger', i } });
      }
      // Every call has resolved, and nothing was written yet: the 50 ms timer has not fired.
      expect(h.statements.filter((s) => s.startsWith('insert_'))).toEqual([]);
      expect(h.engine.runtime.batcher.pendingAsync).toBe(30);
      await eventually(async () => (await doneTagged(db, 'trigger')) === 30, 15_000);
      expect(h.statements.filter((s) => s.startsWith('insert_'))).toEqual([
        'insert_unkeyed_instances',
      ]);
    });

    it('maxBatch rows fire at once without waiting for the timer', async () => {
      h.clear();
      for (let i = 0; i < 250; i++) {
        await h.engine.insertAsync(BatchedFsm, { state: { tag: 'full', i } });
      }
      // 100 and 100 left as full batches the moment they filled; the last 50 wait for the timer.
      await eventually(async () => (await doneTagged(db, 'full')) === 250, 20_000);
      const inserts = h.statements.filter((s) => s.startsWith('insert_'));
      expect(inserts.every((s) => s === 'insert_unkeyed_instances')).toBe(true);
      expect(inserts.length).toBeGreaterThanOrEqual(3);
      expect(inserts.length).toBeLessThanOrEqual(4);
    });

    it('input errors reject the caller and buffer nothing; a manager is refused', async () => {
      await expect(
        h.engine.insertAsync(BatchedFsm, { state: { tag: 'bad' }, priority: 1.5 }),
      ).rejects.toBeInstanceOf(InvalidInputError);
      await expect(
        h.engine.insertAsync(BatchedFsm, { state: [] as unknown as Record<string, unknown> }),
      ).rejects.toBeInstanceOf(InvalidInputError);
      const dataSource = await db.dataSource();
      await dataSource.transaction(async (manager) => {
        await expect(
          h.engine.insertAsync(BatchedFsm, { state: { tag: 'bad' }, manager }),
        ).rejects.toBeInstanceOf(InvalidInputError);
      });
      expect(h.engine.runtime.batcher.pendingAsync).toBe(0);
    });

    it('a failed batch is dropped whole and reported; later batches still land', async () => {
      h.clear();
      await h.engine.insertAsync(BatchedFsm, { state: { tag: 'dropped', i: 0 } });
      await h.engine.insertAsync(BatchedFsm, { state: { tag: 'dropped', poison: 'y' } });
      await h.engine.insertAsync(BatchedFsm, { state: { tag: 'dropped', i: 2 } });
      const event = await h.waitFor('insert_batch:error');
      expect(event.measurements).toEqual({ count: 3 });
      expect(String(event.metadata['error'])).toMatch(/poisoned row/);
      expect(await countTagged(db, 'dropped')).toBe(0);
      await h.engine.insertAsync(BatchedFsm, { state: { tag: 'after-drop' } });
      await eventually(async () => (await doneTagged(db, 'after-drop')) === 1);
    });
  });

  describe('on a web node with a long delay and a small buffer', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [BatchedFsm], {
        name: 'BatcherWeb',
        queues: {},
        reaper: false,
        gc: false,
        insertBatcher: { maxBatch: 100, maxDelayMs: 60_000, maxBuffer: 5 },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('beyond maxBuffer inserts durably (a duplicate ignored), and shutdown drains the buffer', async () => {
      await h.engine.insert(BatchedFsm, { state: { tag: 'seed' }, correlationKey: 'taken' });
      h.clear();
      for (let i = 0; i < 5; i++) {
        await h.engine.insertAsync(BatchedFsm, { state: { tag: 'buffered', i } });
      }
      expect(await countTagged(db, 'buffered')).toBe(0);
      expect(h.engine.runtime.batcher.pendingAsync).toBe(5);

      await h.engine.insertAsync(BatchedFsm, { state: { tag: 'overflow' } });
      expect(await countTagged(db, 'overflow')).toBe(1);
      await expect(
        h.engine.insertAsync(BatchedFsm, {
          state: { tag: 'overflow-dup' },
          correlationKey: 'taken',
        }),
      ).resolves.toBeUndefined();
      expect(await countTagged(db, 'overflow-dup')).toBe(0);
      expect(h.statements).toEqual(['insert_instance', 'insert_instance']);

      await h.close();
      expect(await countTagged(db, 'buffered')).toBe(5);
    });
  });

  describe('without a batcher', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [BatchedFsm], {
        name: 'NoBatcher',
        queues: {},
        reaper: false,
        gc: false,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('insertAsync is a durable insert that ignores duplicates', async () => {
      h.clear();
      await h.engine.insertAsync(BatchedFsm, {
        state: { tag: 'direct' },
        correlationKey: 'direct-key',
      });
      expect(await countTagged(db, 'direct')).toBe(1);
      await expect(
        h.engine.insertAsync(BatchedFsm, {
          state: { tag: 'direct' },
          correlationKey: 'direct-key',
        }),
      ).resolves.toBeUndefined();
      expect(await countTagged(db, 'direct')).toBe(1);
      expect(h.statements).toEqual(['insert_instance', 'insert_instance']);
    });
  });
});
