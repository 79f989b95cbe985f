import { DurableFsm, next, Step, type StepContext, type TransactionalStepContext } from '../../lib';
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
