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

/**
 * Starts a lead insert that sleeps `seconds` in the insert trigger (so it is written alone, the
 * lane idle), then the `calls`, which arrive while it is in flight and so form the next
 * statement together. Resolves with the lead's outcome and the calls' outcomes.
 */
function behindLead<T>(
  h: Harness,
  tag: string,
  calls: () => Promise<T>[],
  seconds = 0.2,
): {
  lead: Promise<string>;
  results: Promise<Array<{ ok: true; value: T } | { ok: false; error: unknown }>>;
} {
  const lead = h.engine.insert(TargetFsm, { state: { tag: `${tag}-lead`, slow: seconds } });
  return { lead, results: settle(calls()) };
}

// docs/design.md §26.11: by default concurrent awaited insert() calls share one INSERT_INSTANCES
// statement (natural batching: a call alone is written at once by INSERT_INSTANCE, calls arriving
// while a statement is in flight form the next one); each caller gets its own id (or its own
// error) only after it committed. A web node (no queues) keeps the rows still, so the table
// shows exactly what landed.
describe('group-commit inserts (default options)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    await installInsertFaults(db);
    h = await bootEngine(db, [TargetFsm], { queues: {}, reaper: false, gc: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('a call alone is written at once by the direct insert statement', async () => {
    h.clear();
    const id = await h.engine.insert(TargetFsm, { state: { tag: 'alone' } });
    expect(h.statements).toEqual(['insert_instance']);
    expect(await countTagged(db, 'alone')).toBe(1);
    expect(id).toMatch(/^\d+$/);
  });

  it('50 concurrent callers take fewer statements than callers, each answered after its commit', async () => {
    h.clear();
    // Read the row when the caller is answered: it must already be committed (visible to
    // another connection), and be the caller's own.
    const seen = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        h.engine.insert(TargetFsm, { state: { tag: 'fifty', i } }).then(async (id) => {
          const rows = (
            await db.pool.query<{ i: number }>(
              `SELECT (state->>'i')::int AS i FROM gen_durable WHERE id = $1`,
              [id],
            )
          ).rows;
          return { id, i: rows[0]?.i };
        }),
      ),
    );
    // The first call finds the lane idle and goes alone; the 49 that arrive meanwhile share one.
    expect(h.statements).toEqual(['insert_instance', 'insert_unkeyed_instances']);
    expect(new Set(seen.map((s) => s.id)).size).toBe(50);
    seen.forEach((s, i) => expect(s.i).toBe(i));
  });

  it('closed-loop callers stay one batch: 50 callers × 4 inserts take 5 statements', async () => {
    h.clear();
    await Promise.all(
      Array.from({ length: 50 }, async (_, c) => {
        for (let round = 0; round < 4; round++) {
          await h.engine.insert(TargetFsm, { state: { tag: 'loop', c, round } });
        }
      }),
    );
    // The lone first call, then one statement per round: a batch's answered callers insert
    // again into the next statement together instead of one of them going alone (which would
    // split every round in two: 8 statements).
    expect(h.statements).toEqual([
      'insert_instance',
      'insert_unkeyed_instances',
      'insert_unkeyed_instances',
      'insert_unkeyed_instances',
      'insert_unkeyed_instances',
    ]);
    expect(await countTagged(db, 'loop')).toBe(200);
  });

  it('a duplicate key in the middle of a batch rejects only its own caller', async () => {
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
    const { lead, results: pending } = behindLead(h, 'dup', () =>
      keys.map((correlationKey, i) =>
        h.engine.insert(TargetFsm, { state: { tag: 'dup', i }, correlationKey }),
      ),
    );
    const results = await pending;
    await lead;
    expect(h.statements).toEqual(['insert_instance', 'insert_instances']);

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

  it('an invalid state or option answers only its caller: refused before joining, the others commit', async () => {
    h.clear();
    const { lead, results: pending } = behindLead(h, 'input', () => [
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 0 } }),
      // PostgreSQL jsonb cannot store \u0000: sent, it would fail the whole statement.
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 1, text: 'a\u0000b' } }),
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 2 } }),
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 3 }, priority: 99_999 }),
      h.engine.insert(TargetFsm, { state: { tag: 'input', i: 4 } }),
    ]);
    const results = await pending;
    await lead;
    expect(results.map((r) => r.ok)).toEqual([true, false, true, false, true]);
    expect(!results[1]!.ok && results[1]!.error).toBeInstanceOf(InvalidInputError);
    expect(!results[1]!.ok && (results[1]!.error as InvalidInputError).message).toMatch(/\\u0000/);
    expect(!results[3]!.ok && results[3]!.error).toBeInstanceOf(InvalidInputError);
    expect(await countTagged(db, 'input')).toBe(3);
    expect(h.statements).toEqual(['insert_instance', 'insert_unkeyed_instances']);
  });

  it('a failed batch rejects every caller in it and acknowledges none', async () => {
    h.clear();
    const { lead, results: pending } = behindLead(h, 'failed-batch', () =>
      Array.from({ length: 5 }, (_, i) =>
        h.engine.insert(TargetFsm, {
          state: i === 2 ? { tag: 'failed-batch', poison: 'x' } : { tag: 'failed-batch', i },
        }),
      ),
    );
    const results = await pending;
    await lead; // the lead was its own statement: it committed
    expect(results.every((r) => !r.ok)).toBe(true);
    for (const r of results) expect(!r.ok && String(r.error)).toMatch(/poisoned row/);
    expect(await countTagged(db, 'failed-batch')).toBe(0);
    expect(await countTagged(db, 'failed-batch-lead')).toBe(1);
    expect(h.eventsOf('insert_batch:error')).toHaveLength(1);
    expect(h.eventsOf('insert_batch:error')[0]!.measurements).toEqual({ count: 5 });
  });

  it('the database connection going away mid-batch rejects every caller of that batch', async () => {
    h.clear();
    const { lead, results: pending } = behindLead(h, 'killed', () =>
      Array.from({ length: 6 }, (_, i) =>
        h.engine.insert(TargetFsm, {
          state: i === 0 ? { tag: 'killed', slow: 30 } : { tag: 'killed', i },
        }),
      ),
    );
    await lead; // answered: the batch statement is on its way, the only one left sleeping
    await killSleepingInsert(db);
    const results = await pending;
    expect(results.every((r) => !r.ok)).toBe(true);
    expect(await countTagged(db, 'killed')).toBe(0);
    expect(h.statements).toEqual(['insert_instance', 'insert_unkeyed_instances']);
    // The lane keeps working after the broken connection.
    const id = await h.engine.insert(TargetFsm, { state: { tag: 'after-kill' } });
    expect(await countTagged(db, 'after-kill')).toBe(1);
    expect(id).toMatch(/^\d+$/);
  });

  it('a lone call that fails is rejected like a direct insert (no batch error event)', async () => {
    h.clear();
    await expect(
      h.engine.insert(TargetFsm, { state: { tag: 'lone-poison', poison: 'z' } }),
    ).rejects.toThrow(/poisoned row z/);
    expect(h.statements).toEqual(['insert_instance']);
    expect(h.eventsOf('insert_batch:error')).toHaveLength(0);
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

describe('group-commit inserts off (insertBatcher.durable false)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [TargetFsm], {
      queues: {},
      reaper: false,
      gc: false,
      insertBatcher: { durable: false },
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('each awaited insert is its own statement', async () => {
    h.clear();
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => h.engine.insert(TargetFsm, { state: { i } })),
    );
    expect(h.statements).toEqual(Array.from({ length: 5 }, () => 'insert_instance'));
  });
});
