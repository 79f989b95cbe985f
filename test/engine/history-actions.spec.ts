import { done, DurableFsm, InvalidInputError, Step, stop } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, claimRows, execute, type Harness } from '../support/engine-harness';
import { Reaper } from '../../lib/runtime/reaper';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Step history of manual actions, stale outcomes and GC (docs/design.md §28.1): cancel and
// retry record their actor (not at level 'off'); an outcome that does not commit writes no
// history; GC takes an instance's history with it.

@DurableFsm({ name: 'hist-act', queue: 'hist-none' })
class ActFsm {
  @Step() start() {
    return stop('broken');
  }
  @Step() fixed() {
    return done();
  }
}

@DurableFsm({ name: 'hist-act-off', queue: 'hist-none', history: 'off' })
class OffFsm {
  @Step() start() {
    return stop('broken');
  }
}

@DurableFsm({ name: 'hist-act-all', queue: 'hist-stale', history: 'transitions' })
class AllFsm {
  @Step() start() {
    return done();
  }
}

describe('history of manual actions, stale outcomes and GC (docs/design.md §28.1)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ActFsm, OffFsm, AllFsm], {
      queues: {},
      reaper: false,
      gc: { interval: 3_600_000, retention: 60_000, batch: 10 },
      poke: 'none',
    });
    gd = GenDurableTesting.forEngine(h.engine);
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('cancel and retry write a row carrying the actor', async () => {
    const id = await h.engine.insert(ActFsm);
    await gd.drain({ queue: 'hist-none' });
    await h.engine.retry(id, { step: 'fixed', actor: 'alice' });
    await h.engine.cancel(id, { actor: 'bob', reason: 'enough' });
    const rows = (await h.engine.history(id)).reverse();
    expect(rows.map((r) => [r.kind, r.step, r.nextStep, r.outcome, r.actor])).toEqual([
      ['stop', 'start', null, 'failed', null],
      ['manual.retry', 'start', 'fixed', 'runnable', 'alice'],
      ['manual.cancel', 'fixed', null, 'cancelled', 'bob'],
    ]);
    expect(rows[0]!.error).toEqual({ name: 'reason', message: 'broken', stack: null });
  });

  it("level 'off' records no manual action; a bad actor is refused, nothing changed", async () => {
    const id = await h.engine.insert(OffFsm);
    await gd.drain({ queue: 'hist-none' });
    await h.engine.retry(id, { actor: 'alice' });
    await h.engine.cancel(id, { actor: 'bob' });
    expect(await h.engine.history(id)).toEqual([]);
    const other = await h.engine.insert(ActFsm);
    for (const actor of ['', 'x'.repeat(201), 7]) {
      await expect(h.engine.cancel(other, { actor: actor as string })).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    }
    expect((await h.engine.get(other))?.status).toBe('runnable');
  });

  it('a stale outcome writes no history row', async () => {
    const id = await h.engine.insert(AllFsm);
    const [row] = await claimRows(h.engine, 'hist-stale', 1, 'worker-stale');
    // The claim is lost (as after a reap and a re-claim): the fencing token moved on.
    await db.pool.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [id]);
    expect(await execute(h.engine, row!)).toBe('stale');
    expect(await h.engine.history(id)).toEqual([]);
  });

  it("the reaper writes a 'reaped' row with the lost worker, in its statement", async () => {
    const id = await h.engine.insert(AllFsm);
    const [row] = await claimRows(h.engine, 'hist-stale', 1, 'worker-lost');
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    const reaper = new Reaper(
      h.engine.runtime.sql,
      60_000,
      3,
      h.engine.runtime.telemetry,
      () => undefined,
      () => undefined,
    );
    h.clear();
    expect((await reaper.sweep()).reaped).toBe(1);
    expect(h.statements).not.toContain('insert_history');
    const rows = await h.engine.history(id);
    expect(rows.map((r) => [r.kind, r.step, r.outcome, r.worker, r.attempt, r.claimSeq])).toEqual([
      ['reaped', 'start', 'runnable', 'worker-lost', 0, row!.claimSeq],
    ]);
  });

  it("GC of a done instance deletes its history (the foreign key's cascade)", async () => {
    const id = await h.engine.insert(AllFsm);
    await gd.drain({ queue: 'hist-stale' });
    expect(await h.engine.history(id)).toHaveLength(1);
    await db.pool.query(
      `UPDATE gen_durable SET updated_at = now() - interval '1 hour' WHERE id = $1`,
      [id],
    );
    await h.engine.runtime.gc!.sweep();
    expect(await h.engine.get(id)).toBeNull();
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable_history WHERE instance_id = $1`,
      [id],
    );
    expect(rows[0].n).toBe(0);
  });
});
