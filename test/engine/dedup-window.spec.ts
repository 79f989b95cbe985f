import { done, DuplicateError, DurableFsm, InvalidInputError, Step } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Dedup windows (docs/identity.md "Dedup windows"): the key stays taken for dedupWindowMs
// after the insert, whatever the instance's status, and is then free.

@DurableFsm({ name: 'dedup', queue: 'dedup-q' })
class QuickFsm {
  @Step() start() {
    return done({});
  }
}

describe('dedup windows (docs/identity.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [QuickFsm], { queues: { 'dedup-q': 2 } });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  /** Ends the key's window now, as if `dedupWindowMs` had passed. */
  const expire = (id: string) =>
    db.pool.query(`UPDATE gen_durable SET dedup_until = now() WHERE id = $1`, [id]);

  it('the key stays taken after the instance ended, until the window closes', async () => {
    const id = await h.engine.insert(QuickFsm, { correlationKey: 'w-1', dedupWindowMs: 600_000 });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toMatchObject({
      kind: 'done',
    });
    expect((await h.engine.get(id))?.dedupUntil).toBeInstanceOf(Date);
    // Ended, out of its (live) scope, but inside its window.
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'w-1' })).rejects.toThrow(
      DuplicateError,
    );
    expect(await h.engine.insert(QuickFsm, { correlationKey: 'w-1', onConflict: 'skip' })).toBe(id);
    expect(await h.engine.insertAll(QuickFsm, [{ correlationKey: 'w-1' }])).toEqual([]);
    await expire(id);
    const next = await h.engine.insert(QuickFsm, { correlationKey: 'w-1' });
    expect(next).not.toBe(id);
  });

  it('a key without a window is free once its instance ended; a window needs a key', async () => {
    const id = await h.engine.insert(QuickFsm, { correlationKey: 'w-2' });
    await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(await h.engine.insert(QuickFsm, { correlationKey: 'w-2' })).not.toBe(id);
    await expect(h.engine.insert(QuickFsm, { dedupWindowMs: 1000 })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(
      h.engine.insert(QuickFsm, { correlationKey: 'w-3', dedupWindowMs: 0 }),
    ).rejects.toThrow(InvalidInputError);
    await expect(
      h.engine.insertAll(QuickFsm, [{ correlationKey: 'w-3', dedupWindowMs: 0 }]),
    ).rejects.toThrow(InvalidInputError);
  });

  it('an empty scope with a window: the key is taken for the window only', async () => {
    const id = await h.engine.insert(QuickFsm, {
      correlationKey: 'w-4',
      correlationScope: [],
      dedupWindowMs: 600_000,
      scheduleIn: 600_000,
    });
    await expect(h.engine.insert(QuickFsm, { correlationKey: 'w-4' })).rejects.toThrow(
      DuplicateError,
    );
    await expire(id);
    expect(await h.engine.insert(QuickFsm, { correlationKey: 'w-4' })).not.toBe(id);
  });
});
