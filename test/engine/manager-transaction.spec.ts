import type { DataSource } from 'typeorm';

import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §2.5: `manager` on insert / insertAll / signal joins the caller's TypeORM transaction —
// the enqueue commits or rolls back with the application's own writes.

@DurableFsm({ name: 'fulfil', queue: 'tx' })
class FulfilFsm {
  @Step() start(ctx: StepContext<{ order: number }>) {
    return done({ order: ctx.state.order });
  }
}

@DurableFsm({ name: 'waiter', queue: 'tx' })
class WaiterFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('paid', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext) {
    return done({ paid: ctx.awaited.map((s) => s.payload) });
  }
}

class Rollback extends Error {}

describe('manager joins the caller transaction (docs/design.md §2.5)', () => {
  let db: TestDatabase;
  let ds: DataSource;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    ds = await db.dataSource();
    await db.pool.query(`CREATE TABLE orders (id int PRIMARY KEY)`);
    h = await bootEngine(db, [FulfilFsm, WaiterFsm], {
      queues: { tx: 2 },
      reaper: false,
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const count = async (sql: string, params: unknown[] = []) =>
    (await db.pool.query(sql, params)).rows[0].n as number;

  it('insert: invisible until commit, then it runs', async () => {
    let insideVisible = -1;
    const id = await ds.transaction(async (manager) => {
      await manager.query(`INSERT INTO orders (id) VALUES (1)`);
      const inserted = await h.engine.insert(FulfilFsm, { state: { order: 1 }, manager });
      insideVisible = await count(`SELECT count(*)::int AS n FROM gen_durable WHERE id = $1`, [
        inserted,
      ]);
      return inserted;
    });
    expect(insideVisible).toBe(0);
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { order: 1 },
    });
    expect(await count(`SELECT count(*)::int AS n FROM orders WHERE id = 1`)).toBe(1);
  });

  it('insert: rolled back with the caller', async () => {
    let id = '';
    await expect(
      ds.transaction(async (manager) => {
        await manager.query(`INSERT INTO orders (id) VALUES (2)`);
        id = await h.engine.insert(FulfilFsm, { state: { order: 2 }, manager });
        throw new Rollback('the app changed its mind');
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(id).toMatch(/^\d+$/);
    expect(await h.engine.get({ id })).toBeNull();
    expect(await count(`SELECT count(*)::int AS n FROM orders WHERE id = 2`)).toBe(0);
  });

  it('insertAll: all or nothing with the caller', async () => {
    let rolledBack: string[] = [];
    await expect(
      ds.transaction(async (manager) => {
        rolledBack = await h.engine.insertAll(
          FulfilFsm,
          [{ state: { order: 3 } }, { state: { order: 4 } }],
          { manager },
        );
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(rolledBack).toHaveLength(2);
    expect(
      await count(`SELECT count(*)::int AS n FROM gen_durable WHERE id = ANY($1::bigint[])`, [
        rolledBack,
      ]),
    ).toBe(0);

    const committed = await ds.transaction((manager) =>
      h.engine.insertAll(FulfilFsm, [{ state: { order: 5 } }, { state: { order: 6 } }], {
        manager,
      }),
    );
    for (const id of committed) {
      expect((await h.engine.await(id, { until: 'terminal' })).kind).toBe('done');
    }
  });

  it('signal: rolled back with the caller (nothing stored, nothing woken), delivered on commit', async () => {
    const id = await h.engine.insert(WaiterFsm);
    expect((await h.engine.await(id)).kind).toBe('awaiting');
    await expect(
      ds.transaction(async (manager) => {
        await h.engine.signal({ id }, 'paid', { amount: 1 }, { manager });
        throw new Rollback();
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(
      await count(`SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1`, [id]),
    ).toBe(0);
    expect(await rowOf(db, id)).toMatchObject({ status: 'awaiting_signal' });

    await ds.transaction((manager) => h.engine.signal({ id }, 'paid', { amount: 2 }, { manager }));
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { paid: [{ amount: 2 }] },
    });
  });

  it('a manager outside an active transaction is refused', async () => {
    const err = await h.engine.insert(FulfilFsm, { manager: ds.manager }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).path).toBe('manager');
  });
});
