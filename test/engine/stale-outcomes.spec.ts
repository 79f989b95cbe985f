import {
  awaitSignal,
  done,
  DurableFsm,
  next,
  type Outcome,
  retry,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { bootEngine, claimRows, execute, Gates, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §6.1, §25.2, §26.1: an outcome whose claim was lost (reaped, or re-claimed by the same
// worker id under a higher claim_seq) is dropped whole: the row, its inbox, its parent and the
// children table stay untouched, and `outcome:stale` is emitted. The executor and flusher are
// the production ones; claims go through the production claim statement on queues no
// scheduler serves, so every interleaving is explicit.

type Kind = 'next' | 'retry' | 'await' | 'scheduleChildren' | 'done' | 'stop';
const gates = new Gates();

@DurableFsm({ name: 'stale-child', queue: 'nowhere' })
class StaleChildFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'fenced', queue: 'stale' })
class FencedFsm {
  @Step() async start(ctx: StepContext<{ kind: Kind }>): Promise<Outcome> {
    await gates.wait(`${ctx.id}:${ctx.attempt}`);
    const state = { kind: ctx.state.kind, by: ctx.attempt };
    switch (ctx.state.kind) {
      case 'next':
        return next('after', state);
      case 'retry':
        return retry(state, 0);
      case 'await':
        return awaitSignal('go', 'after', state);
      case 'scheduleChildren':
        return scheduleChildren(
          'after',
          [{ fsm: StaleChildFsm, queue: 'nowhere' }, StaleChildFsm],
          state,
        );
      case 'done':
        return done({ by: ctx.attempt });
      case 'stop':
        return stop(`stopped by attempt ${ctx.attempt}`);
    }
  }
  @Step() after() {
    return done({});
  }
}

@DurableFsm({ name: 'stale-parent', queue: 'parents' })
class StaleParentFsm {
  @Step() start(ctx: StepContext<{ kind: Kind; queue: string }>) {
    return scheduleChildren(
      'after',
      [{ fsm: FencedFsm, queue: ctx.state.queue, state: { kind: ctx.state.kind } }],
      {},
    );
  }
  @Step() after() {
    return done({});
  }
}

@DurableFsm({ name: 'fence', queue: 'fence' })
class FenceFsm {
  @Step() async start(ctx: StepContext<{ seq: number }>) {
    await gates.wait(`${ctx.id}:start:${ctx.attempt}`);
    return next('middle', { seq: ctx.state.seq + 1, startAttempt: ctx.attempt });
  }
  @Step() async middle(ctx: StepContext<{ seq: number }>) {
    await gates.wait(`${ctx.id}:middle:${ctx.attempt}`);
    return done({ seq: ctx.state.seq + 1 });
  }
}

const KINDS: Kind[] = ['next', 'retry', 'await', 'scheduleChildren', 'done', 'stop'];

describe('stale outcomes (docs/design.md §25.2, §26.1)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [StaleChildFsm, FencedFsm, StaleParentFsm, FenceFsm], {
      queues: {},
      reaper: { interval: 3_600_000 },
      gc: false,
    });
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  /** Everything a stale outcome must not touch: the row, its inbox, its parent, the children. */
  async function snapshot(id: string, parentId: string) {
    const q = async (text: string, params: unknown[]) => (await db.pool.query(text, params)).rows;
    return {
      row: await q(`SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`, [id]),
      inbox: await q(
        `SELECT to_jsonb(s) AS s FROM gen_durable_signals s WHERE target_id = $1 ORDER BY id`,
        [id],
      ),
      parent: await q(`SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`, [parentId]),
      children: await q(`SELECT count(*)::int AS n FROM gen_durable WHERE parent_id = $1`, [id]),
    };
  }

  /** A child of a parked parent, with an awaited signal in its inbox, claimed by `worker` (T1). */
  async function prepare(kind: Kind, worker: string) {
    // Each scenario runs its child on its own queue, so leftovers of others are never claimed.
    const queue = `stale-${worker}`;
    const parentId = await h.engine.insert(StaleParentFsm, {
      state: { kind, queue },
      queue: `parent-${worker}`,
    });
    const [parentRow] = await claimRows(h.engine, `parent-${worker}`, 1, `parent-${worker}`);
    expect(parentRow?.id).toBe(parentId);
    expect(await execute(h.engine, parentRow!)).toBe('committed');
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE parent_id = $1`,
      [parentId],
    );
    const id = rows[0]!.id;
    await h.engine.signal({ id }, 'note', { n: 1 });
    // As if woken from a park on 'note': the step is presented the signal as `awaited`.
    await db.pool.query(`UPDATE gen_durable SET awaits = ARRAY['note'] WHERE id = $1`, [id]);
    const [t1] = await claimRows(h.engine, queue, 1, worker);
    expect(t1?.id).toBe(id);
    expect(t1?.inbox.map((s) => s.name)).toEqual(['note']);
    return { id, parentId, queue, t1: t1! };
  }

  async function expire(id: string): Promise<void> {
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    const swept = await h.engine.runtime.reaper!.sweep();
    expect(swept.reaped).toBe(1);
  }

  describe.each(KINDS)('%s', (kind) => {
    it('is stale after the reaper took the row back', async () => {
      const { id, parentId, t1 } = await prepare(kind, `reaped-${kind}`);
      const running = execute(h.engine, t1);
      await gates.reached(`${id}:0`);
      await expire(id);
      const before = await snapshot(id, parentId);
      expect(before.row[0].r).toMatchObject({ status: 'runnable', attempt: 1, locked_by: null });
      h.clear();
      gates.open(`${id}:0`);
      expect(await running).toBe('stale');
      expect(await snapshot(id, parentId)).toEqual(before);
      expect(h.eventsOf('outcome:stale', id)).toEqual([
        expect.objectContaining({
          measurements: { count: 1 },
          metadata: { id, fsm: 'fenced', step: 'start', kind },
        }),
      ]);
    });

    it('is stale after the same worker id re-claimed the row (claim_seq fencing)', async () => {
      const worker = `same-${kind}`;
      const { id, parentId, queue, t1 } = await prepare(kind, worker);
      const running = execute(h.engine, t1);
      await gates.reached(`${id}:0`);
      await expire(id);
      const [t2] = await claimRows(h.engine, queue, 1, worker);
      expect(t2).toMatchObject({ id, worker, attempt: 1 });
      expect(BigInt(t2!.claimSeq)).toBe(BigInt(t1.claimSeq) + 1n);
      const before = await snapshot(id, parentId);
      expect(before.row[0].r).toMatchObject({ status: 'executing', locked_by: worker });
      h.clear();
      gates.open(`${id}:0`);
      expect(await running).toBe('stale');
      expect(await snapshot(id, parentId)).toEqual(before);
      expect(h.eventsOf('outcome:stale', id)).toHaveLength(1);
      // The current claimant still owns the row and commits.
      gates.open(`${id}:1`);
      expect(await execute(h.engine, t2!)).toBe('committed');
      const after = await snapshot(id, parentId);
      expect(after.row[0].r).not.toEqual(before.row[0].r);
    });
  });

  it('a stale terminal consumes no signal and does not join the parent; the live one does', async () => {
    const worker = 'terminal-check';
    const { id, parentId, queue, t1 } = await prepare('done', worker);
    const running = execute(h.engine, t1);
    await gates.reached(`${id}:0`);
    await expire(id);
    const [t2] = await claimRows(h.engine, queue, 1, worker);
    gates.open(`${id}:0`);
    expect(await running).toBe('stale');
    const { rows: mid } = await db.pool.query(
      `SELECT (SELECT children_pending FROM gen_durable WHERE id = $2) AS pending,
              (SELECT count(*)::int FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NULL) AS unconsumed`,
      [id, parentId],
    );
    expect(mid[0]).toEqual({ pending: 1, unconsumed: 1 });
    gates.open(`${id}:1`);
    expect(await execute(h.engine, t2!)).toBe('committed');
    const { rows: end } = await db.pool.query(
      `SELECT (SELECT children_pending FROM gen_durable WHERE id = $2) AS pending,
              (SELECT status FROM gen_durable WHERE id = $2) AS parent_status,
              (SELECT count(*)::int FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NULL) AS unconsumed,
              (SELECT result FROM gen_durable WHERE id = $1) AS result`,
      [id, parentId],
    );
    expect(end[0]).toEqual({
      pending: 0,
      parent_status: 'runnable',
      unconsumed: 0,
      result: { by: 1 },
    });
  });

  it('fencing (docs/reliability.md S04): the old task of a re-claimed row cannot rewind it', async () => {
    const worker = 'fence-worker';
    const id = await h.engine.insert(FenceFsm, { state: { seq: 0 } });
    const [t1] = await claimRows(h.engine, 'fence', 1, worker);
    const first = execute(h.engine, t1!);
    await gates.reached(`${id}:start:0`);
    // T1 loses its lease; the same worker id claims the row again (T2) and completes step 1.
    await expire(id);
    const [t2] = await claimRows(h.engine, 'fence', 1, worker);
    expect(t2).toMatchObject({ id, step: 'start', attempt: 1 });
    gates.open(`${id}:start:1`);
    expect(await execute(h.engine, t2!)).toBe('committed');
    // The row advanced and is claimed again for step 2 (T3), by the same worker id.
    const [t3] = await claimRows(h.engine, 'fence', 1, worker);
    expect(t3).toMatchObject({ id, step: 'middle', state: { seq: 1, startAttempt: 1 } });
    const third = execute(h.engine, t3!);
    await gates.reached(`${id}:middle:0`);
    const before = (
      await db.pool.query(`SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`, [id])
    ).rows[0].r;
    expect(before).toMatchObject({
      status: 'executing',
      step: 'middle',
      locked_by: worker,
      claim_seq: 3,
    });
    // Now T1 finishes step 1 late: same worker id, row executing — only claim_seq tells it apart.
    h.clear();
    gates.open(`${id}:start:0`);
    expect(await first).toBe('stale');
    expect(h.eventsOf('outcome:stale', id)).toHaveLength(1);
    const after = (
      await db.pool.query(`SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`, [id])
    ).rows[0].r;
    expect(after).toEqual(before);
    gates.open(`${id}:middle:0`);
    expect(await third).toBe('committed');
    expect(await h.engine.get({ id })).toMatchObject({ status: 'done', result: { seq: 2 } });
  });
});
