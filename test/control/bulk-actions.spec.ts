import { DurableFsm, done, InvalidInputError, Step, UnknownStepError } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.7: cancelAll / retryAll work in batches of at most 1 000 rows, one keyset
// statement (bulk_batch) per batch, then the single-row cancel / retry statement per row; they
// report matched / changed, dryRun writes nothing, and bad input is refused before anything runs.
// No scheduler runs: rows stay where the bulk action leaves them.

@DurableFsm({ name: 'bulk-alpha', queue: 'bulk-q' })
class AlphaFsm {
  @Step() start() {
    return done({});
  }
  @Step() again() {
    return done({});
  }
}

@DurableFsm({ name: 'bulk-tree', queue: 'bulk-q' })
class TreeFsm {
  @Step() start() {
    return done({});
  }
}

async function statusCounts(db: TestDatabase, fsm: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ status: string; n: number }>(
    `SELECT status::text AS status, count(*)::int AS n FROM gen_durable WHERE fsm = $1 GROUP BY 1`,
    [fsm],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

async function rejects(call: () => Promise<unknown>, path: string): Promise<void> {
  const err = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidInputError);
  expect((err as InvalidInputError).path).toBe(path);
}

describe('cancelAll / retryAll (docs/design.md §27.7)', () => {
  let db: TestDatabase;
  let h: Harness;
  const N = 10_000;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [AlphaFsm, TreeFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    for (let k = 0; k < N; k += 1000) {
      await h.engine.insertAll(
        AlphaFsm,
        Array.from({ length: 1000 }, (_, i) => ({ state: { i: k + i } })),
      );
    }
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await db?.drop();
  });

  it('bad input is refused before anything runs: InvalidInputError naming the field', async () => {
    h.clear();
    await rejects(() => h.engine.cancelAll({}), 'cancelAll.filter');
    await rejects(() => h.engine.retryAll({}), 'retryAll.filter');
    await rejects(
      () => h.engine.cancelAll({ status: 'sleeping' as never }),
      'cancelAll.filter.status',
    );
    await rejects(
      () => h.engine.cancelAll({ fsm: 'bulk-alpha' }, { mode: 'hard' as never }),
      'cancel.mode',
    );
    await rejects(
      () => h.engine.cancelAll({ fsm: 'bulk-alpha' }, { force: true } as never),
      'cancelAll.options.force',
    );
    await rejects(
      () => h.engine.retryAll({ fsm: 'bulk-alpha' }, { dryRun: 1 as never }),
      'retryAll.dryRun',
    );
    await rejects(
      () => h.engine.retryAll({ status: 'failed' }, { step: 'again' }),
      'retryAll.step',
    );
    await rejects(
      () => h.engine.retryAll({ fsm: 'bulk-alpha' }, { at: new Date(NaN) }),
      'retryAll.at',
    );
    expect(h.statements).toEqual([]);
  });

  it('dryRun counts the matches and writes nothing', async () => {
    h.clear();
    const res = await h.engine.cancelAll({ fsm: 'bulk-alpha' }, { dryRun: true });
    expect(res).toEqual({ matched: N, changed: 0 });
    expect(h.statements.every((s) => s === 'bulk_batch')).toBe(true);
    expect(await statusCounts(db, 'bulk-alpha')).toEqual({ runnable: N });
    // The empty filter with all: true addresses every instance.
    expect(await h.engine.retryAll({}, { all: true, dryRun: true })).toEqual({
      matched: N,
      changed: 0,
    });
  });

  it(`cancels ${N} rows in batches of 1 000, reporting counts; retryAll brings them back`, async () => {
    h.clear();
    const cancelled = await h.engine.cancelAll(
      { fsm: 'bulk-alpha' },
      { reason: 'bulk', children: 'keep', actor: 'ops@example.com' },
    );
    expect(cancelled).toEqual({ matched: N, changed: N });
    const batches = h.statements.filter((s) => s === 'bulk_batch').length;
    // Ten full batches, and one that finds the end; one cancel statement per batch.
    expect(batches).toBe(N / 1000 + 1);
    expect(h.statements.filter((s) => s === 'cancel_batch')).toHaveLength(N / 1000);
    expect(h.statements).not.toContain('cancel_instances');
    expect(await statusCounts(db, 'bulk-alpha')).toEqual({ cancelled: N });
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE cancel_reason = 'bulk'`,
    );
    expect(rows[0]!.n).toBe(N);
    // Each row's manual.cancel history row, with the actor, written by the batch statement.
    const cancelHistory = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable_history
        WHERE kind = 'manual.cancel' AND outcome = 'cancelled' AND actor = 'ops@example.com'`,
    );
    expect(cancelHistory.rows[0]!.n).toBe(N);

    // Again: every row matches, none changes (already terminal).
    expect(await h.engine.cancelAll({ fsm: 'bulk-alpha' })).toEqual({ matched: N, changed: 0 });

    // A step the FSM lacks: refused before the batch holding such a row is written.
    await expect(
      h.engine.retryAll({ fsm: 'bulk-alpha', status: 'cancelled' }, { step: 'nope' }),
    ).rejects.toBeInstanceOf(UnknownStepError);
    expect(await statusCounts(db, 'bulk-alpha')).toEqual({ cancelled: N });

    h.clear();
    const retried = await h.engine.retryAll(
      { fsm: 'bulk-alpha', status: 'cancelled' },
      { step: 'again', actor: 'ops@example.com' },
    );
    expect(retried).toEqual({ matched: N, changed: N });
    const retryHistory = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable_history
        WHERE kind = 'manual.retry' AND step = 'start' AND next_step = 'again' AND actor = 'ops@example.com'`,
    );
    expect(retryHistory.rows[0]!.n).toBe(N);
    expect(h.statements.filter((s) => s === 'bulk_batch').length).toBe(N / 1000 + 1);
    expect(h.statements.filter((s) => s === 'retry_instances')).toHaveLength(N / 1000);
    expect(await statusCounts(db, 'bulk-alpha')).toEqual({ runnable: N });
    const steps = await db.pool.query<{ step: string; n: number }>(
      `SELECT step, count(*)::int AS n FROM gen_durable WHERE fsm = 'bulk-alpha' GROUP BY 1`,
    );
    expect(steps.rows).toEqual([{ step: 'again', n: N }]);
  }, 300_000);

  it('is resumable: a second call finishes what a stopped one left, counting only its own changes', async () => {
    // A call that "crashed" after 2 500 rows: those rows are cancelled, the rest are not.
    await db.pool.query(
      `UPDATE gen_durable SET status = 'cancelled'
        WHERE id IN (SELECT id FROM gen_durable WHERE fsm = 'bulk-alpha' ORDER BY id DESC LIMIT 2500)`,
    );
    const res = await h.engine.cancelAll({ fsm: 'bulk-alpha', status: 'runnable' });
    expect(res).toEqual({ matched: N - 2500, changed: N - 2500 });
    expect(await statusCounts(db, 'bulk-alpha')).toEqual({ cancelled: N });
    // retryAll skips rows it cannot retry: a live row matched is not changed.
    await db.pool.query(
      `UPDATE gen_durable SET status = 'runnable'
        WHERE id IN (SELECT id FROM gen_durable WHERE fsm = 'bulk-alpha' ORDER BY id LIMIT 10)`,
    );
    expect(await h.engine.retryAll({ fsm: 'bulk-alpha' })).toEqual({
      matched: N,
      changed: N - 10,
    });
  }, 300_000);

  it('a cascading cancelAll counts a descendant matched after its ancestor once, with no statement of its own', async () => {
    // Children first, so the root has the highest id and is matched (newest first) before them.
    const kids: string[] = [];
    for (let i = 0; i < 3; i++) kids.push(await h.engine.insert(TreeFsm, { state: { i } }));
    const root = await h.engine.insert(TreeFsm, { state: {} });
    await db.pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = ANY ($2::bigint[])`, [
      root,
      kids,
    ]);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 3 WHERE id = $1`,
      [root],
    );
    h.clear();
    const res = await h.engine.cancelAll({ fsm: 'bulk-tree' });
    expect(res).toEqual({ matched: 4, changed: 4 });
    expect(h.statements.filter((s) => s === 'cancel_instances')).toHaveLength(1);
    expect(await statusCounts(db, 'bulk-tree')).toEqual({ cancelled: 4 });
    // retryAll of the children alone: their parent no longer awaits them (refused), unless detach.
    expect(await h.engine.retryAll({ parentId: root })).toEqual({ matched: 3, changed: 0 });
    expect(await h.engine.retryAll({ parentId: root }, { detach: true })).toEqual({
      matched: 3,
      changed: 3,
    });
    expect(await h.engine.retryAll({ fsm: 'bulk-tree', status: 'cancelled' })).toEqual({
      matched: 1,
      changed: 1,
    });
    expect(await statusCounts(db, 'bulk-tree')).toEqual({ runnable: 4 });
  });

  it('children matched without their parent: one statement cancels them and completes the join; executing rows are asked, or fenced', async () => {
    const parent = await h.engine.insert(TreeFsm, { state: { role: 'parent' } });
    const kids: string[] = [];
    for (let i = 0; i < 3; i++) kids.push(await h.engine.insert(TreeFsm, { state: { i } }));
    await db.pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = ANY ($2::bigint[])`, [
      parent,
      kids,
    ]);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 3 WHERE id = $1`,
      [parent],
    );
    await db.pool.query(
      `UPDATE gen_durable SET status = 'executing', locked_by = 'w', lease_expires_at = now() + interval '1 hour'
        WHERE id = $1`,
      [kids[0]],
    );
    h.clear();
    expect(await h.engine.cancelAll({ parentId: parent }, { reason: 'kids' })).toEqual({
      matched: 3,
      changed: 3,
    });
    expect(h.statements.filter((s) => s !== 'bulk_batch')).toEqual(['cancel_batch']);
    const after = await db.pool.query<{ id: string; status: string; cancel_reason: string | null }>(
      `SELECT id::text, status::text, cancel_reason FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [kids],
    );
    expect(after.rows.map((r) => r.status)).toEqual(['executing', 'cancelled', 'cancelled']);
    expect(after.rows.every((r) => r.cancel_reason === 'kids')).toBe(true);
    // Two of three children ended: the parent still waits for one.
    const p1 = await db.pool.query<{ status: string; children_pending: number }>(
      `SELECT status::text, children_pending FROM gen_durable WHERE id = $1`,
      [parent],
    );
    expect(p1.rows[0]).toEqual({ status: 'awaiting_children', children_pending: 1 });
    // fence: the executing child is cancelled now, its claim fenced, and the parent woken.
    const before = await db.pool.query<{ claim_seq: string }>(
      `SELECT claim_seq::text FROM gen_durable WHERE id = $1`,
      [kids[0]],
    );
    expect(
      await h.engine.cancelAll({ parentId: parent, status: 'executing' }, { mode: 'fence' }),
    ).toEqual({ matched: 1, changed: 1 });
    const fenced = await db.pool.query<{
      status: string;
      claim_seq: string;
      locked_by: string | null;
    }>(`SELECT status::text, claim_seq::text, locked_by FROM gen_durable WHERE id = $1`, [kids[0]]);
    expect(fenced.rows[0]).toEqual({
      status: 'cancelled',
      claim_seq: String(BigInt(before.rows[0]!.claim_seq) + 1n),
      locked_by: null,
    });
    const p2 = await db.pool.query<{ status: string; children_pending: number }>(
      `SELECT status::text, children_pending FROM gen_durable WHERE id = $1`,
      [parent],
    );
    expect(p2.rows[0]).toEqual({ status: 'runnable', children_pending: 0 });
    // retryAll of the children while the parent no longer awaits them: refused unless detach.
    expect(await h.engine.retryAll({ parentId: parent })).toEqual({ matched: 3, changed: 0 });
  });
});
