import {
  awaitSignal,
  done,
  DurableFsm,
  next,
  type Outcome,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { Reaper } from '../../lib/runtime/reaper';
import { GenDurableTesting } from '../../lib/testing';
import {
  bootEngine,
  claimRows,
  execute,
  Gates,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Cancel of executing rows (docs/design.md §27.2): cooperative (the request is stored, the
// owner's flush turns any non-terminal outcome into `cancelled`, a terminal outcome wins, the
// key is held until the step returns, the reaper ends a step that never returns) and fence
// (cancelled at once, claim fenced, the late outcome stale). Claims go through the production
// claim on queues no scheduler serves and run through the production executor, so every
// order is explicit.

type Kind = 'next' | 'await' | 'scheduleChildren' | 'done' | 'inline';
const gates = new Gates();
const ran: string[] = [];

@DurableFsm({ name: 'leaf', queue: 'nowhere' })
class LeafFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'held', queue: 'held' })
class HeldFsm {
  @Step() async start(ctx: StepContext<{ kind: Kind; tag: string }>): Promise<Outcome> {
    ran.push(`${ctx.state.tag}:start`);
    await gates.wait(ctx.state.tag);
    ran.push(`${ctx.state.tag}:returned`);
    switch (ctx.state.kind) {
      case 'next':
        return next('after', ctx.state);
      case 'inline':
        return next('after', ctx.state, { inlineExecution: true });
      case 'await':
        return awaitSignal('go', 'after', ctx.state);
      case 'scheduleChildren':
        return scheduleChildren('after', [LeafFsm, LeafFsm], ctx.state);
      case 'done':
        return done({ finished: ctx.state.tag });
    }
  }
  @Step() after(ctx: StepContext<{ tag: string }>) {
    ran.push(`${ctx.state.tag}:after`);
    return done({ after: true });
  }
}

const holder: { engine?: Harness['engine'] } = {};

@DurableFsm({ name: 'self-cancelling', queue: 'drained' })
class SelfCancellingFsm {
  @Step() async start(ctx: StepContext) {
    await holder.engine?.cancel(ctx.id, { reason: 'from inside' });
    return next('never', ctx.state);
  }
  @Step() never() {
    return done({});
  }
}

describe('cancel of executing rows (docs/design.md §27.2)', () => {
  let db: TestDatabase;
  let h: Harness;
  let n = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [HeldFsm, LeafFsm, SelfCancellingFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    holder.engine = h.engine;
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  /** One held row claimed on its own queue, its step started and waiting at its gate. */
  async function started(kind: Kind, extra: { concurrencyKey?: string } = {}) {
    const tag = `t${++n}`;
    const queue = `held-${n}`;
    const id = await h.engine.insert(HeldFsm, { state: { kind, tag }, queue, ...extra });
    const [row] = await claimRows(h.engine, queue, 1, `worker-${n}`);
    expect(row?.id).toBe(id);
    // An inline `next` chains on the held claim, as under a scheduler (docs/design.md §7).
    const reply =
      kind === 'inline'
        ? h.engine.runtime.executor.execute(row!, { chain: () => true }).then((r) => r.reply)
        : execute(h.engine, row!);
    await gates.reached(tag);
    return { id, tag, queue, reply };
  }

  it('cooperative: the request is stored, and the owner flush turns its `next` into cancelled', async () => {
    const { id, tag, reply } = await started('next');
    const waiting = h.engine.await(id, { timeout: 10_000, until: 'terminal' });
    expect(await h.engine.cancel(id, { reason: 'stop it' })).toEqual({
      cancelled: [],
      requested: [id],
      alreadyTerminal: [],
    });
    const during = await rowOf(db, id);
    expect(during).toMatchObject({ status: 'executing', cancel_reason: 'stop it' });
    expect(during['cancel_requested_at']).toBeInstanceOf(Date);
    // A second request keeps the first reason and is answered `requested` again.
    expect((await h.engine.cancel(id, { reason: 'again' })).requested).toEqual([id]);
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    expect(await waiting).toEqual({ kind: 'cancelled', reason: 'stop it' });
    expect(await rowOf(db, id)).toMatchObject({
      status: 'cancelled',
      step: 'start',
      locked_by: null,
      lease_expires_at: null,
    });
    expect(ran).not.toContain(`${tag}:after`);
  });

  it('cooperative: a row with a parent and a signal gets its riders (the solo flush holds it for a transaction)', async () => {
    const tag = `t${++n}`;
    const queue = `held-${n}`;
    const parent = await h.engine.insert(HeldFsm, {
      state: { kind: 'done', tag: `${tag}-p` },
      queue: 'nowhere',
    });
    const id = await h.engine.insert(HeldFsm, { state: { kind: 'next', tag }, queue });
    await db.pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = $2`, [parent, id]);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
      [parent],
    );
    const [row] = await claimRows(h.engine, queue, 1, `worker-${n}`);
    const reply = execute(h.engine, row!);
    await gates.reached(tag);
    await h.engine.signal(id, 'while-running');
    await h.engine.cancel(id);
    h.clear();
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    expect(h.statements).toEqual([
      'flush_transitions',
      'begin',
      'lock_flush_rows',
      'flush_transitions',
      'consume_inboxes',
      'join_parents',
      // The default history level records the cancel, in the same transaction (§28.1).
      'insert_history',
      'commit',
    ]);
    expect((await rowOf(db, id))['status']).toBe('cancelled');
    expect(await rowOf(db, parent)).toMatchObject({ status: 'runnable', children_pending: 0 });
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1 AND consumed_at IS NULL`,
      [id],
    );
    expect(rows[0].n).toBe(0);
  });

  it('cooperative: a terminal outcome wins over a request', async () => {
    const { id, tag, reply } = await started('done');
    expect((await h.engine.cancel(id)).requested).toEqual([id]);
    gates.open(tag);
    expect(await reply).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'done', result: { finished: tag } });
    expect((await h.engine.cancel(id)).alreadyTerminal).toEqual([id]);
  });

  it('cooperative: a park and a fan-out end cancelled, spawning nothing', async () => {
    const park = await started('await');
    const fan = await started('scheduleChildren');
    await h.engine.cancel(park.id);
    await h.engine.cancel(fan.id);
    gates.open(park.tag);
    gates.open(fan.tag);
    expect(await park.reply).toBe('cancelled');
    expect(await fan.reply).toBe('cancelled');
    expect(await rowOf(db, park.id)).toMatchObject({ status: 'cancelled', awaits: null });
    expect(await rowOf(db, fan.id)).toMatchObject({ status: 'cancelled', children_pending: 0 });
    const { rows } = await db.pool.query(`SELECT id FROM gen_durable WHERE parent_id = $1`, [
      fan.id,
    ]);
    expect(rows).toEqual([]);
  });

  it('cooperative: the K = 1 key stays held until the step returns', async () => {
    const key = `k-${n}`;
    const { id, tag, queue, reply } = await started('next', { concurrencyKey: key });
    const sibling = await h.engine.insert(HeldFsm, {
      state: { kind: 'done', tag: `${tag}-sibling` },
      queue,
      concurrencyKey: key,
    });
    await h.engine.cancel(id);
    // The key's holder is still executing: the sibling is not claimable.
    expect(await claimRows(h.engine, queue, 1, 'other-worker')).toEqual([]);
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    const [next] = await claimRows(h.engine, queue, 1, 'other-worker');
    expect(next?.id).toBe(sibling);
    gates.open(`${tag}-sibling`);
    expect(await execute(h.engine, next!)).toBe('committed');
    expect(ran.indexOf(`${tag}:returned`)).toBeLessThan(ran.indexOf(`${tag}-sibling:start`));
  });

  it('cooperative: an inline chain ends at its continue, the next step never runs', async () => {
    const { id, tag, reply } = await started('inline');
    await h.engine.cancel(id);
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', step: 'start' });
    expect(ran).not.toContain(`${tag}:after`);
  });

  it('fence: cancelled at once, the claim fenced, the late outcome stale; the key is free', async () => {
    const key = `f-${n}`;
    const { id, tag, queue, reply } = await started('next', { concurrencyKey: key });
    const before = await rowOf(db, id);
    const sibling = await h.engine.insert(HeldFsm, {
      state: { kind: 'done', tag: `${tag}-sibling` },
      queue,
      concurrencyKey: key,
    });
    expect(await h.engine.cancel(id, { mode: 'fence', reason: 'hung' })).toEqual({
      cancelled: [id],
      requested: [],
      alreadyTerminal: [],
    });
    const after = await rowOf(db, id);
    expect(after).toMatchObject({ status: 'cancelled', locked_by: null, cancel_reason: 'hung' });
    expect(BigInt(after['claim_seq'] as string)).toBe(BigInt(before['claim_seq'] as string) + 1n);
    // The escape hatch: the key is released while the fenced step may still run.
    const [next] = await claimRows(h.engine, queue, 1, 'other-worker');
    expect(next?.id).toBe(sibling);
    h.clear();
    gates.open(tag);
    expect(await reply).toBe('stale');
    expect(h.eventsOf('outcome:stale', id)).toHaveLength(1);
    expect((await rowOf(db, id))['status']).toBe('cancelled');
    gates.open(`${tag}-sibling`);
    expect(await execute(h.engine, next!)).toBe('committed');
  });

  it('the reaper cancels a requested row whose step never returned, with its riders', async () => {
    const queue = `reaped-${++n}`;
    const parent = await h.engine.insert(HeldFsm, {
      state: { kind: 'done', tag: 'p' },
      queue: 'nowhere',
    });
    const id = await h.engine.insert(HeldFsm, { state: { kind: 'next', tag: `r${n}` }, queue });
    await db.pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = $2`, [parent, id]);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
      [parent],
    );
    // Claimed by a worker that died: nobody heartbeats or flushes it.
    const [row] = await claimRows(h.engine, queue, 1, 'dead-worker');
    expect(row?.id).toBe(id);
    expect((await h.engine.cancel(id)).requested).toEqual([id]);
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    const runtime = h.engine.runtime;
    const reaper = new Reaper(
      runtime.sql,
      3_600_000,
      5,
      runtime.telemetry,
      () => undefined,
      () => undefined,
    );
    h.clear();
    expect(await reaper.sweep()).toEqual({ reaped: 0, poisoned: 0, timeouts: 0, deadlines: 0 });
    expect(h.eventsOf('reaper:cancelled')).toHaveLength(1);
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', attempt: 0, reaps: 0 });
    expect(await rowOf(db, parent)).toMatchObject({ status: 'runnable', children_pending: 0 });
  });

  it('the testing drain tallies a step whose cancel was requested while it ran', async () => {
    const gd = GenDurableTesting.forEngine(h.engine);
    const id = await h.engine.insert(SelfCancellingFsm, {});
    expect(await gd.drain({ queue: 'drained' })).toMatchObject({ steps: 1, cancelled: 1, next: 0 });
    await gd.assertCancelled(id, 'from inside');
  });
});
