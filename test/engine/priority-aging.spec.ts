import { done, DurableFsm, Step } from '../../lib';
import { PriorityAging } from '../../lib/runtime/priority-aging';
import { AGE_PRIORITIES } from '../../lib/sql/maintenance.sql';
import { bootEngine, type Harness } from '../support/engine-harness';
import { explainRan } from '../support/explain-plan';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Priority aging (docs/operations.md "Priority aging"): runnable rows that waited `after` ms
// gain one priority step per `after` ms, up to `floor`, on the GC node. Rows live on queues no
// scheduler serves, and their waiting is written into eligible_at / updated_at, so every pass
// is explicit.

@DurableFsm({ name: 'aging', queue: 'aging-a' })
class AgingFsm {
  @Step() start() {
    return done({});
  }
}

describe('priority aging', () => {
  let db: TestDatabase;
  let h: Harness;
  let aging: PriorityAging;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [AgingFsm], {
      queues: {},
      reaper: false,
      gc: { interval: 3_600_000 },
      priorityAging: { after: 5_000, floor: 1, interval: 3_600_000 },
    });
    aging = new PriorityAging(
      h.engine.runtime.sql,
      { after: 5_000, floor: 1, interval: 3_600_000, batch: 1_000 },
      h.engine.runtime.telemetry,
    );
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  async function row(id: string): Promise<{ priority: number }> {
    const { rows } = await db.pool.query<{ priority: number }>(
      `SELECT priority FROM gen_durable WHERE id = $1`,
      [id],
    );
    return rows[0]!;
  }

  /** Makes `ids` look as if they had been due and untouched for `ms`. */
  async function waited(ids: readonly string[], ms: number): Promise<void> {
    await db.pool.query(
      `UPDATE gen_durable SET eligible_at = now() - make_interval(secs => $2::float8 / 1000),
                              updated_at = now() - make_interval(secs => $2::float8 / 1000)
        WHERE id = ANY ($1::bigint[])`,
      [ids, ms],
    );
  }

  it('starts with the GC when configured', () => {
    expect(h.engine.runtime.priorityAging).toBeInstanceOf(PriorityAging);
  });

  it('raises a waiting row one step per `after`, never past the floor, nor a fresh or held one', async () => {
    const low = await h.engine.insert(AgingFsm, { state: {}, priority: 3 });
    const other = await h.engine.insert(AgingFsm, { state: {}, priority: 5, queue: 'aging-b' });
    const fresh = await h.engine.insert(AgingFsm, { state: {}, priority: 3 });
    const atFloor = await h.engine.insert(AgingFsm, { state: {}, priority: 1 });
    const held = await h.engine.insert(AgingFsm, { state: {}, priority: 3, held: true });
    await waited([low, other, atFloor, held], 6_000);

    expect(await aging.sweep()).toBe(2);
    expect(await row(low)).toEqual({ priority: 2 });
    expect(await row(other)).toEqual({ priority: 4 });
    expect(await row(fresh)).toEqual({ priority: 3 });
    expect(await row(atFloor)).toEqual({ priority: 1 });
    expect(await row(held)).toEqual({ priority: 3 });

    // Just aged (touched now): nothing more until another `after` has passed.
    expect(await aging.sweep()).toBe(0);
    await waited([low, other], 6_000);
    expect(await aging.sweep()).toBe(2);
    expect(await row(low)).toEqual({ priority: 1 });
    expect(await row(other)).toEqual({ priority: 3 });
    // At the floor now: it stays there.
    await waited([low], 6_000);
    expect(await aging.sweep()).toBe(0);
    expect(await row(low)).toEqual({ priority: 1 });
  });

  it('an aged row is claimed before younger rows of its new priority', async () => {
    const queue = 'aging-order';
    const young = await h.engine.insert(AgingFsm, { state: {}, priority: 2, queue });
    const old = await h.engine.insert(AgingFsm, { state: {}, priority: 3, queue });
    await waited([old], 6_000);
    await aging.sweep();
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE queue = $1 AND status = 'runnable'
        ORDER BY priority, eligible_at`,
      [queue],
    );
    expect(rows.map((r) => r.id)).toEqual([old, young]);
  });

  it('reads through the claim index (gen_durable_pick), not the table', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const { used } = await explainRan(
        client,
        AGE_PRIORITIES,
        AGE_PRIORITIES.params({ floor: 1, afterMs: 5_000, batch: 1_000 }),
      );
      expect(used).toContain('gen_durable_pick');
      expect(used.filter((u) => u.startsWith('seq:'))).toEqual([]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});
