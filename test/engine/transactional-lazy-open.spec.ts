import { DataSource } from 'typeorm';

import {
  done,
  DurableFsm,
  next,
  Step,
  type StepContext,
  type TransactionalStepContext,
} from '../../lib';
import { bootEngine, claimRows, execute, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/transactional-steps.md "What it costs": a transactional step's connection and
// START TRANSACTION wait for its first statement through `ctx.manager`; a step that runs none
// commits its outcome through the flusher, as a plain step. The transaction the engine opens is
// TypeORM's too: `ctx.manager.transaction()` inside the step nests a savepoint.

type LazyState = { write: boolean; nested?: boolean };

const LEDGER_DDL = `CREATE TABLE lazy_ledger (instance_id bigint NOT NULL, what text NOT NULL)`;

@DurableFsm({ name: 'tx-lazy', queue: 'nowhere' })
class TxLazyFsm {
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<LazyState>) {
    if (ctx.state.write) {
      await ctx.manager.query(`INSERT INTO lazy_ledger (instance_id, what) VALUES ($1, 'step')`, [
        ctx.id,
      ]);
    }
    if (ctx.state.nested === true) {
      // A nested transaction that fails: its savepoint rolls back, the step's row stays.
      await ctx.manager
        .transaction(async (inner) => {
          await inner.query(`INSERT INTO lazy_ledger (instance_id, what) VALUES ($1, 'inner')`, [
            ctx.id,
          ]);
          throw new Error('inner rolls back');
        })
        .catch(() => undefined);
    }
    return next('finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<LazyState>) {
    return next('finish', ctx.state);
  }
}

@DurableFsm({ name: 'tx-isolation', queue: 'nowhere' })
class TxIsolationFsm {
  /** Reads the settings its transaction was opened with. */
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<Record<string, never>>) {
    const [row] = await ctx.manager.query<{ level: string; idle: string }[]>(
      `SELECT current_setting('transaction_isolation') AS level,
              current_setting('idle_in_transaction_session_timeout') AS idle`,
    );
    return done({ level: row!.level, idle: row!.idle });
  }
}

describe('transactional steps open their transaction at their first statement', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(LEDGER_DDL);
    h = await bootEngine(db, [TxLazyFsm], { reaper: { interval: 3_600_000 }, gc: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const ledger = async (id: string): Promise<string[]> =>
    (
      await db.pool.query<{ what: string }>(
        `SELECT what FROM lazy_ledger WHERE instance_id = $1 ORDER BY what`,
        [id],
      )
    ).rows.map((r) => r.what);

  async function claimed(state: LazyState, worker: string) {
    const queue = `lazy-${worker}`;
    const id = await h.engine.insert(TxLazyFsm, { state, queue });
    const [row] = await claimRows(h.engine, queue, 1, worker);
    expect(row?.id).toBe(id);
    return { id, row: row! };
  }

  it('a step that runs no statement opens no transaction: its outcome commits through the flusher', async () => {
    const { id, row } = await claimed({ write: false }, 'none');
    h.clear();
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'finish' });
    const flush = h.statements.filter(
      (n) => n === 'step_transaction_bounds' || n.startsWith('flush_'),
    );
    expect(flush).toEqual(['flush_transitions']);
  });

  it('a step that writes opens its transaction once, before its first statement', async () => {
    const { id, row } = await claimed({ write: true }, 'writes');
    h.clear();
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual(['step']);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'finish' });
    const flush = h.statements.filter(
      (n) => n === 'step_transaction_bounds' || n.startsWith('flush_'),
    );
    expect(flush).toEqual(['step_transaction_bounds', 'flush_transitions']);
  });

  it("ctx.manager.transaction() nests a savepoint: its rollback keeps the step's own write", async () => {
    const { id, row } = await claimed({ write: true, nested: true }, 'nested');
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual(['step']);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'finish' });
  });

  it('a nested transaction as the first statement still runs inside the step transaction', async () => {
    const { id, row } = await claimed({ write: false, nested: true }, 'nested-first');
    h.clear();
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual([]);
    const flush = h.statements.filter(
      (n) => n === 'step_transaction_bounds' || n.startsWith('flush_'),
    );
    expect(flush).toEqual(['step_transaction_bounds', 'flush_transitions']);
  });
});

describe("a transactional step's transaction takes the DataSource's isolation level", () => {
  let db: TestDatabase;
  let dataSource: DataSource;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    dataSource = new DataSource({
      type: 'postgres',
      url: db.url,
      isolationLevel: 'REPEATABLE READ',
      extra: { max: 4 },
    });
    await dataSource.initialize();
    h = await bootEngine(db, [TxIsolationFsm], {
      dataSource,
      leaseTtl: 5000,
      reaper: { interval: 3_600_000 },
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await dataSource.destroy();
    await db.drop();
  });

  it('opens it with START TRANSACTION ISOLATION LEVEL and the idle bound, in one round trip', async () => {
    const id = await h.engine.insert(TxIsolationFsm, { state: {}, queue: 'iso' });
    const [row] = await claimRows(h.engine, 'iso', 1, 'iso');
    h.clear();
    expect(await execute(h.engine, row!)).toBe('committed');
    // The bound is the lease (5 s): the step has no longer timeout.
    expect(await rowOf(db, id)).toMatchObject({
      status: 'done',
      result: { level: 'repeatable read', idle: '5s' },
    });
    expect(h.statements.filter((n) => n === 'step_transaction_bounds')).toHaveLength(1);
  });
});
