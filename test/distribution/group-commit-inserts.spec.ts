import { DuplicateError, DurableFsm, done, InvalidInputError, Step } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { countTagged, installInsertFaults, killSleepingInsert } from './support/insert-faults';

@DurableFsm({ name: 'gc_insert_target' })
class TargetFsm {
  @Step() start() {
    return done();
  }
}

/** Settles every promise; the outcome per position. */
async function settle<T>(
  promises: Promise<T>[],
): Promise<Array<{ ok: true; value: T } | { ok: false; error: unknown }>> {
  const results = await Promise.allSettled(promises);
  return results.map((r) =>
    r.status === 'fulfilled'
      ? { ok: true as const, value: r.value }
      : { ok: false as const, error: r.reason as unknown },
  );
}

// docs/design.md §26.11: with `insertBatcher: { durable: true }` concurrent awaited insert() calls share
// one INSERT_INSTANCES statement; each caller gets its own id (or its own error) only after it
// committed. A web node (no queues) keeps the rows still, so the table shows exactly what landed.
describe('group-commit inserts (insertBatcher.durable)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    await installInsertFaults(db);
    h = await bootEngine(db, [TargetFsm], {
      queues: {},
      reaper: false,
      gc: false,
      insertBatcher: { durable: true, maxBatch: 1000 },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('50 concurrent callers share one statement and each gets its own committed id', async () => {
    h.clear();
    const ids = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        h.engine.insert(TargetFsm, { state: { tag: 'fifty', i } }),
      ),
    );
    expect(h.statements.filter((s) => s === 'insert_instances')).toHaveLength(1);
    expect(h.statements).not.toContain('insert_instance');
    expect(new Set(ids).size).toBe(50);
    // Every acknowledged id exists, and it is the row of the caller that got it.
    const rows = (
      await db.pool.query<{ id: string; i: number }>(
        `SELECT id, (state->>'i')::int AS i FROM gen_durable WHERE id = ANY($1::bigint[])`,
        [ids],
      )
    ).rows;
    expect(rows).toHaveLength(50);
    const byId = new Map(rows.map((r) => [r.id, r.i]));
    ids.forEach((id, i) => expect(byId.get(id)).toBe(i));
  });

  it('a duplicate key rejects only its own caller (against the table and within the batch)', async () => {
    await h.engine.insert(TargetFsm, {
      state: { tag: 'dup-seed' },
      correlationKey: 'dup-existing',
    });
    h.clear();
    const keys: Array<string | undefined> = [
      undefined,
      undefined,
      undefined,
      'dup-existing',
      undefined,
      'dup-pair',
      'dup-pair',
      undefined,
    ];
    const results = await settle(
      keys.map((correlationKey, i) =>
        h.engine.insert(TargetFsm, { state: { tag: 'dup', i }, correlationKey }),
      ),
    );
    expect(h.statements.filter((s) => s === 'insert_instances')).toHaveLength(1);

    const third = results[3]!;
    expect(third.ok).toBe(false);
    expect(!third.ok && third.error).toBeInstanceOf(DuplicateError);
    expect(!third.ok && (third.error as DuplicateError).correlationKey).toBe('dup-existing');
    const pair = [results[5]!, results[6]!];
    expect(pair.filter((r) => r.ok)).toHaveLength(1);
    const loser = pair.find((r) => !r.ok);
    expect(loser && !loser.ok && loser.error).toBeInstanceOf(DuplicateError);
    for (const i of [0, 1, 2, 4, 7]) expect(results[i]!.ok).toBe(true);

    // What the winners were told is what the table holds.
    const acknowledged = results.flatMap((r) => (r.ok ? [r.value] : []));
    const rows = (
      await db.pool.query<{ id: string }>(`SELECT id FROM gen_durable WHERE state->>'tag' = 'dup'`)
    ).rows;
    expect(rows.map((r) => r.id).sort()).toEqual([...acknowledged].sort());
    const winner = (
      await db.pool.query<{ i: number }>(
        `SELECT (state->>'i')::int AS i FROM gen_durable WHERE correlation_key = 'dup-pair'`,
      )
    ).rows;
    expect(winner).toHaveLength(1);
    expect(results[winner[0]!.i]!.ok).toBe(true);
  });

  it('an input error is its caller own: validated before joining, the others commit', async () => {
    h.clear();
    const results = await settle([
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 0 } }),
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 1 }, priority: 99_999 }),
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 2 } }),
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(!results[1]!.ok && results[1]!.error).toBeInstanceOf(InvalidInputError);
    expect(await countTagged(db, 'input')).toBe(2);
    expect(h.statements.filter((s) => s === 'insert_instances')).toHaveLength(1);
  });

  it('a failed batch rejects every caller in it and acknowledges none', async () => {
    h.clear();
    const results = await settle(
      Array.from({ length: 5 }, (_, i) =>
        h.engine.insert(TargetFsm, {
          state: i === 2 ? { tag: 'failed-batch', poison: 'x' } : { tag: 'failed-batch', i },
        }),
      ),
    );
    expect(results.every((r) => !r.ok)).toBe(true);
    for (const r of results) expect(!r.ok && String(r.error)).toMatch(/poisoned row/);
    expect(await countTagged(db, 'failed-batch')).toBe(0);
    expect(h.eventsOf('insert_batch:error')).toHaveLength(1);
    expect(h.eventsOf('insert_batch:error')[0]!.measurements).toEqual({ count: 5 });
  });

  it('a batch whose connection is killed before commit acknowledges none of its callers', async () => {
    const pending = settle(
      Array.from({ length: 6 }, (_, i) =>
        h.engine.insert(TargetFsm, {
          state: i === 0 ? { tag: 'killed', slow: 30 } : { tag: 'killed', i },
        }),
      ),
    );
    await killSleepingInsert(db);
    const results = await pending;
    expect(results.every((r) => !r.ok)).toBe(true);
    expect(await countTagged(db, 'killed')).toBe(0);
    // The lane keeps working after the broken connection.
    const id = await h.engine.insert(TargetFsm, { state: { tag: 'after-kill' } });
    expect(await countTagged(db, 'after-kill')).toBe(1);
    expect(id).toMatch(/^\d+$/);
  });

  it('a call with a manager bypasses the batcher and joins the caller transaction', async () => {
    const dataSource = await db.dataSource();
    const seen: Array<{ name: string; inTransaction: boolean }> = [];
    const off = h.engine.runtime.sql.onStatement((e) => seen.push(e));
    try {
      await expect(
        dataSource.transaction(async (manager) => {
          await h.engine.insert(TargetFsm, { state: { tag: 'manager' }, manager });
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
    } finally {
      off();
    }
    expect(seen).toEqual([{ name: 'insert_instance', inTransaction: true }]);
    expect(await countTagged(db, 'manager')).toBe(0);
  });
});
