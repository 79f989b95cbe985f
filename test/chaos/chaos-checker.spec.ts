import { randomUUID } from 'node:crypto';

import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { audit } from './harness/checker';
import { createLedger } from './harness/ledger';

// The chaos checker's cancel and retry invariants (issue 17) on synthetic ledgers: each check
// fails on the history it must refuse and passes on the one it must accept. The rows are
// written directly (no engine runs); the history trigger records their updates as it does in
// a chaos run.

const NO_MONITOR = { monitor: {}, crashes: 0, deadlocks: 0 };

describe('chaos checker: cancels and retries', () => {
  let db: TestDatabase;

  beforeEach(async () => {
    db = await createTestDatabase();
    await createLedger(db.pool);
  });
  afterEach(async () => {
    await db.drop();
  });

  const row = async (
    fsm: string,
    status: string,
    seq: number,
    parent: string | null = null,
    step = 'start',
  ): Promise<string> => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, status, queue, state, parent_id)
       VALUES ($1, $2, $3, 'default', jsonb_build_object('seq', $4::int), $5) RETURNING id::text`,
      [fsm, step, status, seq, parent],
    );
    return rows[0]!.id;
  };
  const setStatus = (id: string, status: string): Promise<unknown> =>
    db.pool.query(`UPDATE gen_durable SET status = $2 WHERE id = $1`, [id, status]);
  const insertOp = (id: string, fsm: string): Promise<unknown> =>
    db.pool.query(
      `INSERT INTO chaos.client_ops (op, instance_id, fsm, invoked_at, completed_at, result)
       VALUES ('insert', $1, $2, now() - interval '1 minute', now() - interval '1 minute', 'ok')`,
      [id, fsm],
    );
  const cancelOp = (
    target: string,
    answer: { cancelled: string[]; requested?: string[]; liveAfter?: unknown[] },
    agoSeconds = 30,
  ): Promise<unknown> =>
    db.pool.query(
      `INSERT INTO chaos.client_ops (op, instance_id, fsm, name, invoked_at, completed_at, result, options, answer)
       VALUES ('cancel', $1, 'chaos_fanout', 'cooperative', now() - make_interval(secs => $3), now() - make_interval(secs => $3),
               'ok', '{"mode":"cooperative","children":"cascade"}', $2)`,
      [
        target,
        JSON.stringify({
          requested: [],
          alreadyTerminal: [],
          liveAfter: [],
          ...answer,
        }),
        agoSeconds,
      ],
    );

  /** A fan-out cancelled with cascade, its first child cancelled with it. */
  const cancelledTree = async (): Promise<{ root: string; c1: string }> => {
    const root = await row('chaos_fanout', 'cancelled', 1, null, 'join');
    const c1 = await row('chaos_child', 'cancelled', 0, root);
    await insertOp(root, 'chaos_fanout');
    return { root, c1 };
  };

  it('I-CANCEL-TREE: a live descendant of a cascade-cancelled tree at the end fails the run', async () => {
    const { root, c1 } = await cancelledTree();
    const c2 = await row('chaos_child', 'runnable', 0, root);
    const grandchild = await row('chaos_child', 'cancelled', 0, c2);
    await cancelOp(root, { cancelled: [root, c1, grandchild] });
    const broken = await audit(db.pool, NO_MONITOR);
    expect(broken.hard['I-CANCEL-TREE']).toBe(1);
    expect(broken.examples['I-CANCEL-TREE']).toEqual([
      expect.objectContaining({ root, id: c2, status: 'runnable', seen: 'at the end' }),
    ]);

    await setStatus(c2, 'cancelled');
    const fixed = await audit(db.pool, NO_MONITOR);
    expect(fixed.hard['I-CANCEL-TREE']).toBe(0);
    expect(fixed.hard['I-LOST']).toBe(0);
    expect(fixed.hard['I-LOST-ANY']).toBe(0);
    expect(fixed.hard['I-CANCEL-UNASKED']).toBe(0);
    expect(fixed.hard['I-REWIND']).toBe(0);
  });

  it('I-CANCEL-TREE: a row the sender found live right after the cancel answered counts', async () => {
    const { root, c1 } = await cancelledTree();
    await cancelOp(root, { cancelled: [root, c1], liveAfter: [{ id: c1, status: 'runnable' }] });
    const result = await audit(db.pool, NO_MONITOR);
    expect(result.hard['I-CANCEL-TREE']).toBe(1);
    expect(result.examples['I-CANCEL-TREE']).toEqual([
      expect.objectContaining({ id: c1, seen: 'after the answer' }),
    ]);
  });

  it('I-CANCEL-UNASKED: a row cancelled with no cancel of it or an ancestor fails', async () => {
    const lone = await row('chaos_linear', 'cancelled', 2);
    await insertOp(lone, 'chaos_linear');
    const result = await audit(db.pool, NO_MONITOR);
    expect(result.hard['I-CANCEL-UNASKED']).toBe(1);
    expect(result.hard['I-LOST']).toBe(0);
  });

  it('I-CANCEL-UNASKED: a cascade-cancelled child whose parent row was deleted first keeps its ancestry', async () => {
    const { root, c1 } = await cancelledTree();
    const c2 = await row('chaos_child', 'cancelled', 0, root);
    await cancelOp(root, { cancelled: [root, c1, c2] });
    // GC (or the archive) deletes the parent in one statement and a child in a later one: the
    // foreign key's ON DELETE SET NULL clears the children's parent_id in between.
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [root]);
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [c1]);
    const { rows } = await db.pool.query<{ parent_id: string | null }>(
      `SELECT parent_id FROM gen_durable WHERE id = $1`,
      [c2],
    );
    expect(rows).toEqual([{ parent_id: null }]);
    const result = await audit(db.pool, NO_MONITOR);
    expect(result.hard['I-CANCEL-UNASKED']).toBe(0);
    expect(result.figures['children outliving their parent row']).toBe(2);
  });

  it('I-CANCEL-AFTER: a cancelled row revived without a retry fails; with a retry it passes', async () => {
    const { root, c1 } = await cancelledTree();
    await cancelOp(root, { cancelled: [root, c1] });
    await setStatus(c1, 'runnable');
    await setStatus(c1, 'cancelled');
    const revived = await audit(db.pool, NO_MONITOR);
    expect(revived.hard['I-CANCEL-AFTER']).toBe(1);

    await db.pool.query(
      `INSERT INTO chaos.client_ops (op, instance_id, fsm, name, invoked_at, completed_at, result)
       VALUES ('retry', $1, 'chaos_child', 'plain', now() - interval '10 seconds', now() - interval '10 seconds', 'ok')`,
      [c1],
    );
    const retried = await audit(db.pool, NO_MONITOR);
    expect(retried.hard['I-CANCEL-AFTER']).toBe(0);
    // A retried row must end done (it ended cancelled again here).
    expect(retried.hard['I-RETRY-UNDONE']).toBe(1);
  });

  it('I-REWIND: a cancelled row may stop mid-path, past its path it fails; a done one needs it all', async () => {
    const stopped = await row('chaos_linear', 'cancelled', 3);
    await cancelOp(stopped, { cancelled: [stopped] });
    expect((await audit(db.pool, NO_MONITOR)).hard['I-REWIND']).toBe(0);
    await db.pool.query(`UPDATE gen_durable SET state = '{"seq": 6}' WHERE id = $1`, [stopped]);
    expect((await audit(db.pool, NO_MONITOR)).hard['I-REWIND']).toBeGreaterThan(0);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', state = '{"seq": 3}', result = '{"seq": 3}' WHERE id = $1`,
      [stopped],
    );
    expect((await audit(db.pool, NO_MONITOR)).hard['I-REWIND']).toBeGreaterThan(0);
  });

  it("I-INSERT-IDENTITY: an insert acknowledged with another phase's instance fails", async () => {
    const id = await row('chaos_linear', 'done', 5);
    await db.pool.query(`UPDATE gen_durable SET result = '{"seq": 5}' WHERE id = $1`, [id]);
    const ack = (fsm: string, key: string): Promise<unknown> =>
      db.pool.query(
        `INSERT INTO chaos.client_ops (op, instance_id, fsm, dedup_key, invoked_at, completed_at, result)
         VALUES ('insert', $1, $2, $3, now(), now(), 'ok')`,
        [id, fsm, key],
      );
    await ack('chaos_linear', 'ins:control:3');
    expect((await audit(db.pool, NO_MONITOR)).hard['I-INSERT-IDENTITY']).toBe(0);
    // The chaos phase's job 3 "found" the control phase's instance under its key.
    await ack('chaos_failer', 'ins:chaos:3');
    expect((await audit(db.pool, NO_MONITOR)).hard['I-INSERT-IDENTITY']).toBe(2);
  });

  it('I-REEXEC-EXPLAINED: an execution a cancel dropped is explained; one that just vanished is not', async () => {
    const execution = (id: string, fsm: string): Promise<unknown> =>
      db.pool.query(
        `INSERT INTO chaos.executions (exec_id, instance_id, fsm, step, step_seq, attempt, worker, started_at, ended_at)
         VALUES ($1, $2, $3, 's1', 1, 0, 'w1', clock_timestamp() - interval '1 second', clock_timestamp())`,
        [randomUUID(), id, fsm],
      );
    const cancelled = await row('chaos_linear', 'executing', 0);
    await execution(cancelled, 'chaos_linear');
    await setStatus(cancelled, 'cancelled');
    await cancelOp(cancelled, { cancelled: [cancelled] }, 0);
    const explained = await audit(db.pool, NO_MONITOR);
    expect(explained.hard['I-REEXEC-EXPLAINED']).toBe(0);
    expect(explained.figures['executions dropped by a cancel']).toBe(1);

    const vanished = await row('chaos_linear', 'executing', 0);
    await execution(vanished, 'chaos_linear');
    await setStatus(vanished, 'runnable');
    const unexplained = await audit(db.pool, NO_MONITOR);
    expect(unexplained.hard['I-REEXEC-EXPLAINED']).toBe(1);
  });
});
