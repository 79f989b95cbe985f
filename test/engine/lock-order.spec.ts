import type { PoolClient } from 'pg';

import { done, DurableFsm, next, type Outcome, Step, type StepContext } from '../../lib';
import { RELEASE_CLAIMS } from '../../lib/sql/lease.sql';
import { renderStatement } from '../../lib/sql/statement';
import {
  bootEngine,
  claimRows,
  execute,
  Gates,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Lock order between a child's writers and a cancel of that child (docs/design.md §6.3 step 0).
// A cancel locks its target and the target's parent in one pass in id order: the parent first.
// The flush of the child's terminal outcome, and the reaper ending the child, used to lock the
// child first and the parent after (the join), so the two waited on each other: Postgres broke
// the cycle by failing one (F-DEADLOCK in the chaos run). Here a plain transaction plays the
// cancel: it holds the parent, lets the writer start waiting, then asks for the child. Its
// `deadlock_timeout` is 10 ms, so if a cycle forms this connection is the one Postgres fails.
// A release of claims (a buffer given back) takes its rows in id order too (finding F-R13).

const gates = new Gates();

@DurableFsm({ name: 'lock-order-child', queue: 'nowhere' })
class ChildFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>): Promise<Outcome> {
    await gates.wait(ctx.state.tag);
    return done({ tag: ctx.state.tag });
  }
}

@DurableFsm({ name: 'lock-order-parent', queue: 'nowhere' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return next('start', ctx.state);
  }
}

describe('lock order: a child and a cancel holding its parent never deadlock', () => {
  let db: TestDatabase;
  let h: Harness;
  let n = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ChildFsm, ParentFsm], {
      queues: {},
      reaper: { interval: 3_600_000 },
      gc: false,
      poke: 'none',
    });
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  /** A parent awaiting one child, the child inserted after it (a higher id), on its own queue. */
  async function family(): Promise<{ parent: string; child: string; queue: string; tag: string }> {
    const tag = `c${++n}`;
    const queue = `lock-order-${n}`;
    const parent = await h.engine.insert(ParentFsm, { state: {} });
    const child = await h.engine.insert(ChildFsm, { state: { tag }, queue });
    await db.pool.query(`UPDATE gen_durable SET parent_id = $1 WHERE id = $2`, [parent, child]);
    await db.pool.query(
      `UPDATE gen_durable SET status = 'awaiting_children', children_pending = 1 WHERE id = $1`,
      [parent],
    );
    expect(BigInt(parent) < BigInt(child)).toBe(true);
    return { parent, child, queue, tag };
  }

  /** A transaction holding `id`'s row lock as a cancel does, failing first on any cycle. */
  async function holdRow(id: string): Promise<PoolClient> {
    const c = await db.pool.connect();
    await c.query('BEGIN');
    await c.query(`SET LOCAL deadlock_timeout = '10ms'`);
    await c.query(`SET LOCAL lock_timeout = '20s'`);
    await c.query(`SELECT id FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE`, [id]);
    return c;
  }

  /** Resolves once another backend of this database waits for a row lock. */
  async function someoneWaits(holder: PoolClient): Promise<void> {
    const { rows } = await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const self = rows[0]!.pid;
    for (let i = 0; i < 2_000; i++) {
      const waiting = await db.pool.query(
        `SELECT 1 FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> $1 AND wait_event_type = 'Lock'`,
        [self],
      );
      if (waiting.rowCount! > 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('no backend started waiting for the held parent');
  }

  it("a child's terminal flush waits for the parent before it takes the child", async () => {
    const { parent, child, queue, tag } = await family();
    const [row] = await claimRows(h.engine, queue, 1, `worker-${n}`);
    expect(row?.id).toBe(child);
    const reply = execute(h.engine, row!);
    await gates.reached(tag);
    const holder = await holdRow(parent);
    try {
      gates.open(tag);
      await someoneWaits(holder);
      // The cancel's second lock: the flush must not hold the child while it waits.
      await holder.query(`SELECT id FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE`, [child]);
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    expect(await reply).toBe('committed');
    expect(await rowOf(db, child)).toMatchObject({ status: 'done' });
    expect(await rowOf(db, parent)).toMatchObject({ status: 'runnable', children_pending: 0 });
  });

  it('the flush takes the parent and the child in one pass, before its first write', async () => {
    const { queue, tag } = await family();
    const [row] = await claimRows(h.engine, queue, 1, `worker-${n}`);
    const reply = execute(h.engine, row!);
    await gates.reached(tag);
    h.clear();
    gates.open(tag);
    expect(await reply).toBe('committed');
    expect(h.statements).toEqual([
      'begin',
      'lock_flush_rows',
      'flush_done',
      'join_parents',
      'commit',
    ]);
  });

  it("a release of rows another transaction holds takes them in id order, whatever the scan's order", async () => {
    // A worker paused past its lease releases its buffer; meanwhile another worker re-claimed
    // those rows and its flush takes them in id order. Here the holder plays that flush: it
    // holds the lower row, and asks for the higher one once the release waits.
    const queue = `lock-order-release-${++n}`;
    const first = await h.engine.insert(ChildFsm, { state: { tag: 'unused' }, queue });
    const second = await h.engine.insert(ChildFsm, { state: { tag: 'unused' }, queue });
    const worker = `worker-${n}`;
    const rows = await claimRows(h.engine, queue, 2, worker);
    expect(rows.map((r) => r.id).sort()).toEqual([first, second].sort());
    // A later version of the lower row: a sequential scan now meets the higher row first (the
    // chaos run's deadlock came from such a scan order, `while locking tuple (138,124)`).
    await db.pool.query(`UPDATE gen_durable SET updated_at = now() WHERE id = $1`, [first]);
    const releaser = await db.pool.connect();
    const holder = await holdRow(first);
    let released: Promise<{ rows: { id: string }[] }>;
    try {
      await releaser.query('BEGIN');
      await releaser.query('SET LOCAL enable_indexscan = off');
      await releaser.query('SET LOCAL enable_bitmapscan = off');
      released = releaser.query<{ id: string }>({
        text: renderStatement(RELEASE_CLAIMS, 'public'),
        values: RELEASE_CLAIMS.params({ worker, rows }),
      });
      await someoneWaits(holder);
      // Had the release taken the rows in the scan's order, it would hold `second` now.
      await holder.query(`SELECT id FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE`, [second]);
      await holder.query('COMMIT');
      expect((await released).rows.map((r) => r.id).sort()).toEqual([first, second].sort());
      await releaser.query('COMMIT');
    } finally {
      holder.release();
      releaser.release();
    }
    expect(await rowOf(db, first)).toMatchObject({ status: 'runnable', locked_by: null });
    expect(await rowOf(db, second)).toMatchObject({ status: 'runnable', locked_by: null });
  });

  it('the reaper skips a child whose parent is locked, and ends it on its next sweep', async () => {
    const { parent, child, queue } = await family();
    // Claimed by a worker that died; its cancel was requested, so its lease ends it.
    const [row] = await claimRows(h.engine, queue, 1, 'dead-worker');
    expect(row?.id).toBe(child);
    expect((await h.engine.cancel(child)).requested).toEqual([child]);
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [child],
    );
    // The engine's own reaper, whose timer never fires here (interval of an hour).
    const reaper = h.engine.runtime.reaper!;
    const holder = await holdRow(parent);
    try {
      // The sweep does not wait for the parent: it leaves the child as it was, and completes
      // (a sweep that failed, on a lock or statement timeout, leaves lastSweepAt unset).
      reaper.lastSweepAt = 0;
      expect(await reaper.sweep()).toEqual({ reaped: 0, poisoned: 0, timeouts: 0, deadlines: 0 });
      expect(reaper.lastSweepAt).toBeGreaterThan(0);
      expect(await rowOf(db, child)).toMatchObject({ status: 'executing' });
      await holder.query(`SELECT id FROM gen_durable WHERE id = $1 FOR NO KEY UPDATE`, [child]);
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    await reaper.sweep();
    expect(await rowOf(db, child)).toMatchObject({ status: 'cancelled' });
    expect(await rowOf(db, parent)).toMatchObject({ status: 'runnable', children_pending: 0 });
  });
});
