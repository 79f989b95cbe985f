import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  retry,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import {
  bootEngine,
  claimRows,
  eventually,
  execute,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Strict order per key (docs/sequences.md): the claim's sequence guard, driven by hand on a
// queue no scheduler serves (claimRows + execute), so every claim's answer is asserted.

type SeqState = { mode?: 'ok' | 'stop' | 'retry' | 'await'; n?: number; tenant?: string };

/** Ids whose step started, in start order. */
const started: string[] = [];

@DurableFsm({ name: 'seq', queue: 'seq-q' })
class SeqFsm {
  @Step() start(ctx: StepContext<SeqState>) {
    started.push(ctx.id);
    switch (ctx.state.mode) {
      case 'stop':
        return stop('broken');
      case 'retry':
        return retry({ ...ctx.state, mode: 'ok' }, 600_000);
      case 'await':
        return awaitSignal('go', 'finish', ctx.state);
      default:
        return done({ n: ctx.state.n ?? null });
    }
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({
  name: 'seq-tenant',
  queue: 'seq-q',
  sequenceKey: (s: SeqState) => s.tenant,
  onHeadFailure: 'skip',
})
class TenantFsm {
  @Step() start(ctx: StepContext<SeqState>) {
    started.push(ctx.id);
    return ctx.state.mode === 'stop' ? stop('broken') : done({});
  }
}

@DurableFsm({ name: 'seq-bad-key', queue: 'seq-q', sequenceKey: () => 42 as unknown as string })
class BadKeyFsm {
  @Step() start() {
    return done({});
  }
}

const Q = 'seq-q';

describe('strict order per key: sequenceKey (docs/sequences.md)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [SeqFsm, TenantFsm, BadKeyFsm], {
      queues: {},
      gc: false,
      poke: 'none',
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });
  beforeEach(async () => {
    started.length = 0;
    // Every test starts from an empty table: a leftover head would hold its key.
    await db.pool.query(`DELETE FROM gen_durable`);
  });

  /** Claims (batch `n`) and runs what it took; answers the claimed ids in claim order. */
  async function round(n = 10): Promise<string[]> {
    const rows = await claimRows(h.engine, Q, n, 'w');
    for (const row of rows) await execute(h.engine, row);
    return rows.map((r) => r.id);
  }

  it('runs each key one row at a time, in id order, across many claims; keys are independent', async () => {
    // Interleaved: a0 b0 c0 a1 b1 c1 … and a second batch after the first, so ids interleave.
    const keys = ['a', 'b', 'c'];
    const ids: Record<string, string[]> = { a: [], b: [], c: [] };
    for (let i = 0; i < 4; i++) {
      const batch = await h.engine.insertAll(
        SeqFsm,
        keys.map((k) => ({ sequenceKey: `k-${k}`, state: { n: i } })),
      );
      keys.forEach((k, j) => ids[k]!.push(batch[j]!));
    }
    const claims: string[][] = [];
    for (let r = 0; r < 4; r++) claims.push(await round(10));
    // Each claim takes exactly the current head of every key, never a second row of a key.
    for (let r = 0; r < 4; r++) {
      expect([...claims[r]!].sort()).toEqual(keys.map((k) => ids[k]![r]!).sort());
    }
    expect(await round(10)).toEqual([]);
    for (const k of keys) {
      const order = started.filter((id) => ids[k]!.includes(id));
      expect(order).toEqual(ids[k]);
    }
  });

  it('rows without a key are not held by keyed rows and claim as before', async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'mixed', state: { mode: 'stop' } });
    const behind = await h.engine.insert(SeqFsm, { sequenceKey: 'mixed' });
    const plain = await h.engine.insertAll(SeqFsm, [{}, {}, {}]);
    expect((await round(10)).sort()).toEqual([head, ...plain].sort());
    // The failed head blocks (default 'block'); plain rows never were.
    expect(await round(10)).toEqual([]);
    expect(await rowOf(db, behind)).toMatchObject({ status: 'runnable', claim_seq: '0' });
    expect(await rowOf(db, plain[0]!)).toMatchObject({ status: 'done', sequence_key: null });
  });

  it('a retried head waiting on its backoff is not overtaken by the next row of its key', async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'bo', state: { mode: 'retry' } });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'bo' });
    expect(await round()).toEqual([head]);
    expect(await rowOf(db, head)).toMatchObject({ status: 'runnable' });
    expect((await rowOf(db, head))['eligible_at']).toBeInstanceOf(Date);
    // The head waits 10 minutes; the next row is due, yet several claims leave it.
    expect(await round()).toEqual([]);
    expect(await round()).toEqual([]);
    expect(await rowOf(db, next)).toMatchObject({ status: 'runnable', claim_seq: '0' });
    // Once the backoff is over, the head runs first, and only then the next row.
    await db.pool.query(`UPDATE gen_durable SET eligible_at = now() WHERE id = $1`, [head]);
    expect(await round()).toEqual([head]);
    expect(await round()).toEqual([next]);
    expect(started).toEqual([head, head, next]);
  });

  it('a reaped head (lease expired, runnable again) keeps its place', async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'reap' });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'reap' });
    // Claimed by a worker that dies: the step never runs.
    const [lost] = await claimRows(h.engine, Q, 10, 'lost-worker');
    expect(lost?.id).toBe(head);
    expect(await claimRows(h.engine, Q, 10, 'w')).toEqual([]);
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [head],
    );
    await eventually(async () => (await rowOf(db, head))['status'] === 'runnable');
    expect(await rowOf(db, head)).toMatchObject({ reaps: 1, locked_by: null });
    // A first reap keeps eligible_at: the head is due and claimed before its follower.
    expect(await round()).toEqual([head]);
    expect(await round()).toEqual([next]);
    expect(started).toEqual([head, next]);
  });

  it("a failed head: 'block' holds the key until retried, then the head runs first", async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'blk', state: { mode: 'stop' } });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'blk' });
    expect(await round()).toEqual([head]);
    expect(await rowOf(db, head)).toMatchObject({ status: 'failed', on_head_failure: 'block' });
    expect(await round()).toEqual([]);
    await h.engine.retry<SeqState>(head, { state: (s) => ({ ...s, mode: 'ok' }) });
    expect(await round()).toEqual([head]);
    expect(await round()).toEqual([next]);
  });

  it("a failed head: 'skip' releases the key once failed; a retry backoff still holds it", async () => {
    const head = await h.engine.insert(SeqFsm, {
      sequenceKey: 'skp',
      onHeadFailure: 'skip',
      state: { mode: 'stop' },
    });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'skp' });
    expect(await round()).toEqual([head]);
    expect(await rowOf(db, head)).toMatchObject({ status: 'failed', on_head_failure: 'skip' });
    expect(await round()).toEqual([next]);

    const retrying = await h.engine.insert(SeqFsm, {
      sequenceKey: 'skp-2',
      onHeadFailure: 'skip',
      state: { mode: 'retry' },
    });
    const behind = await h.engine.insert(SeqFsm, { sequenceKey: 'skp-2' });
    expect(await round()).toEqual([retrying]);
    expect(await round()).toEqual([]);
    expect(await rowOf(db, behind)).toMatchObject({ status: 'runnable', claim_seq: '0' });
  });

  it('cancelling a head releases its key: a failed one, a retrying one, an awaiting one', async () => {
    const failed = await h.engine.insert(SeqFsm, { sequenceKey: 'c1', state: { mode: 'stop' } });
    const afterFailed = await h.engine.insert(SeqFsm, { sequenceKey: 'c1' });
    const retrying = await h.engine.insert(SeqFsm, { sequenceKey: 'c2', state: { mode: 'retry' } });
    const afterRetrying = await h.engine.insert(SeqFsm, { sequenceKey: 'c2' });
    const parked = await h.engine.insert(SeqFsm, { sequenceKey: 'c3', state: { mode: 'await' } });
    const afterParked = await h.engine.insert(SeqFsm, { sequenceKey: 'c3' });
    expect((await round()).sort()).toEqual([failed, retrying, parked].sort());
    expect(await rowOf(db, parked)).toMatchObject({ status: 'awaiting_signal' });
    expect(await round()).toEqual([]);
    // A failed row cannot be cancelled (it has ended): it is purged to release a 'block' key.
    await h.engine.purge(failed);
    await h.engine.cancel(retrying);
    await h.engine.cancel(parked);
    expect((await round()).sort()).toEqual([afterFailed, afterRetrying, afterParked].sort());
  });

  it('a held head holds its key; released, it runs first', async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'held', held: true });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'held' });
    expect(await round()).toEqual([]);
    await h.engine.release(head);
    expect(await round()).toEqual([head]);
    expect(await round()).toEqual([next]);
  });

  it("the FSM's default: sequenceKey(state) and onHeadFailure; an insert's own wins", async () => {
    const a = await h.engine.insert(TenantFsm, { state: { tenant: 't1', mode: 'stop' } });
    const b = await h.engine.insert(TenantFsm, { state: { tenant: 't1' } });
    const own = await h.engine.insert(TenantFsm, {
      state: { tenant: 't1' },
      sequenceKey: 'own',
      onHeadFailure: 'block',
    });
    const none = await h.engine.insert(TenantFsm, { state: {} });
    expect(await rowOf(db, a)).toMatchObject({ sequence_key: 't1', on_head_failure: 'skip' });
    expect(await rowOf(db, own)).toMatchObject({ sequence_key: 'own', on_head_failure: 'block' });
    expect(await rowOf(db, none)).toMatchObject({ sequence_key: null, on_head_failure: null });
    expect((await round()).sort()).toEqual([a, own, none].sort());
    // 't1' under the FSM's 'skip': its failed head released the key.
    expect(await round()).toEqual([b]);
  });

  it('blockedSequences: each held key, its head and why, how many wait and since when', async () => {
    const failed = await h.engine.insert(SeqFsm, { sequenceKey: 'b-f', state: { mode: 'stop' } });
    await h.engine.insertAll(SeqFsm, [{ sequenceKey: 'b-f' }, { sequenceKey: 'b-f' }]);
    const retrying = await h.engine.insert(SeqFsm, {
      sequenceKey: 'b-r',
      state: { mode: 'retry' },
    });
    await h.engine.insert(SeqFsm, { sequenceKey: 'b-r' });
    const held = await h.engine.insert(SeqFsm, { sequenceKey: 'b-h', held: true });
    await h.engine.insert(SeqFsm, { sequenceKey: 'b-h' });
    const scheduled = await h.engine.insert(SeqFsm, { sequenceKey: 'b-s', scheduleIn: 600_000 });
    await h.engine.insert(SeqFsm, { sequenceKey: 'b-s' });
    // A key whose head is alone holds nobody: not listed.
    await h.engine.insert(SeqFsm, { sequenceKey: 'b-alone', state: { mode: 'stop' } });
    await round();
    const blocked = await h.engine.blockedSequences();
    const byKey = Object.fromEntries(blocked.map((b) => [b.key, b]));
    expect(Object.keys(byKey).sort()).toEqual(['b-f', 'b-h', 'b-r', 'b-s']);
    expect(byKey['b-f']).toMatchObject({
      headId: failed,
      headStatus: 'failed',
      headStep: 'start',
      headError: 'broken',
      waiting: 2,
    });
    expect(byKey['b-f']!.waitingSince).toBeInstanceOf(Date);
    expect(byKey['b-r']).toMatchObject({ headId: retrying, headStatus: 'retrying', waiting: 1 });
    expect(byKey['b-h']).toMatchObject({ headId: held, headStatus: 'held', waiting: 1 });
    expect(byKey['b-s']).toMatchObject({ headId: scheduled, headStatus: 'scheduled' });
    // The longest waiting first; limit and key filter.
    expect(blocked[0]!.key).toBe('b-f');
    expect(await h.engine.blockedSequences({ limit: 1 })).toHaveLength(1);
    expect((await h.engine.blockedSequences({ key: 'b-h' })).map((b) => b.key)).toEqual(['b-h']);
    for (const [options, path] of [
      [{ limit: 0 }, 'blockedSequences.limit'],
      [{ key: '' }, 'blockedSequences.key'],
      [{ queue: 'x' }, 'blockedSequences.options.queue'],
    ] as const) {
      const err = await h.engine
        .blockedSequences(options as unknown as { limit?: number })
        .catch((e: unknown) => e);
      expect((err as InvalidInputError).path).toBe(path);
    }
  });

  it('skipSequenceHead releases the key of a failed head and keeps the row; refuses a live one', async () => {
    const head = await h.engine.insert(SeqFsm, { sequenceKey: 'sk', state: { mode: 'stop' } });
    const next = await h.engine.insert(SeqFsm, { sequenceKey: 'sk' });
    expect(await round()).toEqual([head]);
    expect(await round()).toEqual([]);
    const live = await h.engine
      .skipSequenceHead(next)
      .catch((e: unknown) => e as InvalidInputError);
    expect(live).toBeInstanceOf(InvalidInputError);
    expect(await h.engine.skipSequenceHead(head)).toEqual({ id: head, changed: true });
    expect(await h.engine.skipSequenceHead(head)).toEqual({ id: head, changed: false });
    expect(await rowOf(db, head)).toMatchObject({ status: 'failed', on_head_failure: 'skip' });
    expect(await round()).toEqual([next]);
    const plain = await h.engine.insert(SeqFsm, { state: { mode: 'stop' } });
    await round();
    await expect(h.engine.skipSequenceHead(plain)).rejects.toThrow(InvalidInputError);
  });

  it('bad sequenceKey / onHeadFailure input: InvalidInputError naming the field, nothing stored', async () => {
    const cases: [unknown, string][] = [
      [{ sequenceKey: '' }, 'insert.sequenceKey'],
      [{ sequenceKey: 7 }, 'insert.sequenceKey'],
      [{ sequenceKey: 'x'.repeat(513) }, 'insert.sequenceKey'],
      [{ sequenceKey: 'k', onHeadFailure: 'ignore' }, 'insert.onHeadFailure'],
      [{ onHeadFailure: 'skip' }, 'insert.onHeadFailure'],
    ];
    for (const [options, path] of cases) {
      const err = await h.engine
        .insert(SeqFsm, options as Parameters<typeof h.engine.insert>[1])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).path).toBe(path);
    }
    const entry = await h.engine
      .insertAll(SeqFsm, [{}, { sequenceKey: '' }])
      .catch((e: unknown) => e);
    expect((entry as InvalidInputError).path).toBe('insertAll[1].sequenceKey');
    const derived = await h.engine.insert(BadKeyFsm, {}).catch((e: unknown) => e);
    expect(derived).toBeInstanceOf(InvalidInputError);
    expect((derived as InvalidInputError).path).toBe('insert.sequenceKey');
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM gen_durable`);
    expect(rows[0]).toEqual({ n: 0 });
  });
});
