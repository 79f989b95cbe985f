import {
  ConfigurationError,
  done,
  DurableFsm,
  next,
  retry,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
  type TransactionalStepContext,
} from '../../lib';
import {
  bootEngine,
  claimRows,
  eventually,
  execute,
  Gates,
  type Harness,
  rowOf,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/transactional-steps.md: a transactional step's writes through `ctx.manager` commit in
// the same transaction as its outcome (ownership and claim_seq fencing, history, children),
// exactly once; a stale claim, a throw, a retry or a stop rolls them back. Claims go through the
// production pick on queues no scheduler serves (every interleaving explicit), except the
// cancel case, which needs a scheduler's heartbeat.

type Mode = 'next' | 'throw' | 'retry' | 'stop' | 'children' | 'done' | 'query';
type TxState = {
  mode: Mode;
  gate?: boolean;
};
const gates = new Gates();

const LEDGER_DDL = `CREATE TABLE tx_ledger (
  instance_id bigint NOT NULL, step text NOT NULL, attempt int NOT NULL)`;

async function record(ctx: TransactionalStepContext<unknown>): Promise<void> {
  await ctx.manager.query(
    `INSERT INTO tx_ledger (instance_id, step, attempt) VALUES ($1, $2, $3)`,
    [ctx.id, ctx.step, ctx.attempt],
  );
}

/** Resolves when `signal` aborts; never otherwise. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

@DurableFsm({ name: 'tx-child', queue: 'nowhere' })
class TxChildFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'tx-steps', queue: 'tx-hand', history: 'transitions' })
class TxFsm {
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<TxState>) {
    await record(ctx);
    if (ctx.state.gate === true) await gates.wait(`${ctx.id}:${ctx.attempt}`);
    switch (ctx.state.mode) {
      case 'next':
        return next('finish', ctx.state);
      case 'throw':
        throw new Error('boom after the write');
      case 'retry':
        return retry(ctx.state, 60_000);
      case 'stop':
        return stop('given up');
      case 'children':
        return scheduleChildren('finish', [{ fsm: TxChildFsm, queue: 'nowhere' }], ctx.state);
      case 'done':
        return done({ ok: true });
      case 'query':
        // A statement after the gate: it fails when the connection was lost meanwhile.
        await ctx.manager.query('SELECT 1');
        return next('finish', ctx.state);
    }
  }
  @Step() finish(ctx: StepContext<TxState>) {
    return done({ plain: ctx.manager === undefined });
  }
}

@DurableFsm({ name: 'tx-live', queue: 'tx-live' })
class TxLiveFsm {
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<Record<string, never>>) {
    await record(ctx);
    gates.wait(`${ctx.id}:live`).catch(() => undefined);
    await aborted(ctx.signal);
    return next('finish', {});
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({ name: 'tx-inline', queue: 'tx-live', inlineExecution: true })
class TxInlineFsm {
  @Step() start() {
    return next('write', {});
  }
  /** Reached by an inline hand-off from `start`; its own `next` is not run ahead. */
  @Step({ transactional: true })
  async write(ctx: TransactionalStepContext<Record<string, never>>) {
    await record(ctx);
    return next('end', {});
  }
  @Step() end() {
    return done({ ended: true });
  }
}

@DurableFsm({ name: 'tx-slow', queue: 'tx-hand' })
class TxSlowFsm {
  /** Stuck in a statement past its timeout. */
  @Step({ transactional: true, timeout: 300 })
  async start(ctx: TransactionalStepContext<Record<string, never>>) {
    await record(ctx);
    await ctx.manager.query(`SELECT pg_sleep(30)`);
    return next('finish', {});
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({ name: 'tx-idle', queue: 'tx-hand' })
class TxIdleFsm {
  /** Idle in its transaction longer than the lease (5 s here), no timeout. */
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<Record<string, never>>) {
    await record(ctx);
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    return next('finish', {});
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({ name: 'tx-job', queue: 'tx-hand', transactional: true })
class TxJob {
  async perform(state: { fail: boolean }, ctx: TransactionalStepContext<{ fail: boolean }>) {
    await record(ctx);
    if (state.fail) throw new Error('job failed after the write');
    return { wrote: true };
  }
}

describe('transactional steps (docs/transactional-steps.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(LEDGER_DDL);
    h = await bootEngine(
      db,
      [TxChildFsm, TxFsm, TxLiveFsm, TxJob, TxSlowFsm, TxIdleFsm, TxInlineFsm],
      {
        leaseTtl: 5000,
        queues: { 'tx-live': 2 },
        reaper: { interval: 3_600_000 },
        gc: false,
      },
    );
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  const ledger = async (id: string): Promise<{ step: string; attempt: number }[]> =>
    (
      await db.pool.query<{ step: string; attempt: number }>(
        `SELECT step, attempt FROM tx_ledger WHERE instance_id = $1 ORDER BY attempt`,
        [id],
      )
    ).rows;

  /** Inserts a `tx-steps` row on its own queue and claims it as `worker`. */
  async function claimed(state: TxState, worker: string) {
    const queue = `tx-${worker}`;
    const id = await h.engine.insert(TxFsm, { state, queue });
    const [row] = await claimRows(h.engine, queue, 1, worker);
    expect(row?.id).toBe(id);
    return { id, queue, row: row! };
  }

  async function expire(id: string): Promise<void> {
    await db.pool.query(
      `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    expect((await h.engine.runtime.reaper!.sweep()).reaped).toBe(1);
  }

  it("commits the step's row and its outcome together, in one transaction, bypassing the flusher", async () => {
    const { id, row } = await claimed({ mode: 'next' }, 'commits');
    h.clear();
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual([{ step: 'start', attempt: 0 }]);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'finish' });
    // The guarded write ran on the step's transaction client (in a transaction), after its bound.
    // (The scheduler of the 'tx-live' queue polls meanwhile: only the flush's names are kept.)
    const flushNames = new Set(['step_transaction_bounds', 'begin', 'commit', 'flush_transitions']);
    expect(h.statements.filter((n) => flushNames.has(n) || n.startsWith('flush_'))).toEqual([
      'step_transaction_bounds',
      'flush_transitions_recorded',
    ]);
    const { rows } = await db.pool.query(
      `SELECT kind, step, next_step FROM gen_durable_history WHERE instance_id = $1`,
      [id],
    );
    expect(rows).toEqual([{ kind: 'next', step: 'start', next_step: 'finish' }]);
  });

  it('a plain step after it gets no manager', async () => {
    const { id, queue, row } = await claimed({ mode: 'next' }, 'plain-after');
    expect(await execute(h.engine, row)).toBe('committed');
    const [second] = await claimRows(h.engine, queue, 1, 'plain-after');
    expect(await execute(h.engine, second!)).toBe('committed');
    expect((await rowOf(db, id))['result']).toEqual({ plain: true });
  });

  it('a stale claim (reaped mid-step) rolls the row back with the outcome; the re-run writes one', async () => {
    const { id, queue, row } = await claimed({ mode: 'next', gate: true }, 'reaped');
    const running = execute(h.engine, row);
    await gates.reached(`${id}:0`);
    await expire(id);
    h.clear();
    gates.open(`${id}:0`);
    expect(await running).toBe('stale');
    expect(await ledger(id)).toEqual([]);
    expect(h.eventsOf('outcome:stale', id)).toHaveLength(1);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'start', attempt: 1 });
    const [again] = await claimRows(h.engine, queue, 1, 'reaped');
    gates.open(`${id}:1`);
    expect(await execute(h.engine, again!)).toBe('committed');
    expect(await ledger(id)).toEqual([{ step: 'start', attempt: 1 }]);
  });

  it('a stale claim of a step that schedules children inserts no child and no row', async () => {
    const { id, row } = await claimed({ mode: 'children', gate: true }, 'fenced-children');
    const running = execute(h.engine, row);
    await gates.reached(`${id}:0`);
    expect((await h.engine.cancel(id, { mode: 'fence' })).cancelled).toEqual([id]);
    gates.open(`${id}:0`);
    expect(await running).toBe('stale');
    expect(await ledger(id)).toEqual([]);
    expect(h.eventsOf('outcome:stale', id)).toHaveLength(1);
    const { rows } = await db.pool.query(`SELECT id FROM gen_durable WHERE parent_id = $1`, [id]);
    expect(rows).toEqual([]);
    expect((await rowOf(db, id))['status']).toBe('cancelled');
  });

  it('children scheduled by a transactional step commit with its row', async () => {
    const { id, row } = await claimed({ mode: 'children' }, 'children');
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toHaveLength(1);
    const { rows } = await db.pool.query(`SELECT fsm FROM gen_durable WHERE parent_id = $1`, [id]);
    expect(rows).toEqual([{ fsm: 'tx-child' }]);
    expect(await rowOf(db, id)).toMatchObject({ status: 'awaiting_children', children_pending: 1 });
  });

  it('a throw rolls the write back; the failure is recorded in its own statement', async () => {
    const { id, row } = await claimed({ mode: 'throw' }, 'throws');
    h.clear();
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual([]);
    const stored = await rowOf(db, id);
    // No onError: a throw stops the instance (docs/design.md §2.7).
    expect(stored).toMatchObject({ status: 'failed', step: 'start' });
    expect(String(stored['last_error'])).toContain('boom after the write');
    // The failure went through the flusher: its statement outside the step's transaction.
    expect(h.statements).toContain('flush_transitions_recorded');
  });

  it("a step that throws because its transaction's connection died spends no attempt: the reaper re-runs it", async () => {
    const { id, row } = await claimed({ mode: 'query', gate: true }, 'killed');
    const reply = execute(h.engine, row);
    await gates.reached(`${id}:0`);
    // The step's own transaction (it wrote its ledger row: it has an xid) loses its backend.
    const { rows } = await db.pool.query<{ killed: boolean }>(
      `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'idle in transaction'
          AND backend_xid IS NOT NULL AND query LIKE 'INSERT INTO tx_ledger%'`,
    );
    expect(rows.map((r) => r.killed)).toEqual([true]);
    h.clear();
    gates.open(`${id}:0`);
    // Its `SELECT 1` threw a connection-level error: not the step's failure, so nothing is
    // recorded and no attempt is spent; the row stays executing for the reaper.
    expect(await reply).toBe('error');
    expect(await ledger(id)).toEqual([]);
    const stored = await rowOf(db, id);
    expect(stored).toMatchObject({ status: 'executing', step: 'start', attempt: 0 });
    expect(stored['last_error']).toBeNull();
    expect(h.statements).not.toContain('flush_transitions_recorded');
    expect(h.eventsOf('executor:crash', id)).toHaveLength(1);
    await expire(id);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', step: 'start' });
  });

  it.each([
    ['retry', { status: 'runnable', attempt: 1 }],
    ['stop', { status: 'failed' }],
  ] as const)('a %s outcome rolls the write back and commits alone', async (mode, expected) => {
    const { id, row } = await claimed({ mode }, `outcome-${mode}`);
    expect(await execute(h.engine, row)).toBe('committed');
    expect(await ledger(id)).toEqual([]);
    expect(await rowOf(db, id)).toMatchObject(expected);
  });

  it('a job with @DurableFsm({ transactional }) commits its write with its result, or rolls it back', async () => {
    const ok = await h.engine.insert(TxJob, { state: { fail: false }, queue: 'tx-job-ok' });
    const [okRow] = await claimRows(h.engine, 'tx-job-ok', 1, 'job');
    expect(await execute(h.engine, okRow!)).toBe('committed');
    expect(await ledger(ok)).toEqual([{ step: 'perform', attempt: 0 }]);
    expect(await rowOf(db, ok)).toMatchObject({ status: 'done', result: { wrote: true } });
    const bad = await h.engine.insert(TxJob, { state: { fail: true }, queue: 'tx-job-bad' });
    const [badRow] = await claimRows(h.engine, 'tx-job-bad', 1, 'job');
    expect(await execute(h.engine, badRow!)).toBe('committed');
    expect(await ledger(bad)).toEqual([]);
    expect(await rowOf(db, bad)).toMatchObject({ status: 'runnable', attempt: 1 });
  });

  it('a cancel during a long transactional step aborts ctx.signal at the heartbeat; nothing persists', async () => {
    const id = await h.engine.insert(TxLiveFsm, { state: {} });
    await gates.reached(`${id}:live`);
    // The step holds its transaction open while the heartbeat, on another connection, runs.
    expect((await h.engine.cancel(id, { reason: 'enough' })).requested).toEqual([id]);
    const answer = await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
    expect(answer).toEqual({ kind: 'cancelled', reason: 'enough' });
    expect(h.eventsOf('step:abort', id).map((e) => e.metadata['cause'])).toEqual(['cancelled']);
    expect(await ledger(id)).toEqual([]);
    expect(await rowOf(db, id)).toMatchObject({ status: 'cancelled', step: 'start' });
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction'
            AND (query LIKE '%tx_ledger%' OR query LIKE '%set_config%')`,
      );
      return rows[0]!.n === 0;
    });
  });

  it('a step past its timeout, stuck in a statement: its connection is dropped, not waited for', async () => {
    const id = await h.engine.insert(TxSlowFsm, { state: {}, queue: 'tx-slow' });
    const [row] = await claimRows(h.engine, 'tx-slow', 1, 'slow');
    const started = Date.now();
    expect(await execute(h.engine, row!)).toBe('committed');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await ledger(id)).toEqual([]);
    const stored = await rowOf(db, id);
    expect(stored['status']).toBe('failed');
    expect(String(stored['last_error'])).toContain('StepTimeoutError');
    // The server ended the stuck statement with its session.
    await eventually(async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND query = 'SELECT pg_sleep(30)' AND state = 'active'`,
      );
      return rows[0]!.n === 0;
    });
  });

  it('a step idle in its transaction past the lease loses its connection: nothing commits', async () => {
    const id = await h.engine.insert(TxIdleFsm, { state: {}, queue: 'tx-idle' });
    const [row] = await claimRows(h.engine, 'tx-idle', 1, 'idle');
    h.clear();
    // The server ended the session (idle_in_transaction_session_timeout = the lease): the
    // outcome cannot be written; the row stays executing for the reaper.
    expect(await execute(h.engine, row!)).toBe('error');
    expect(await ledger(id)).toEqual([]);
    expect(await rowOf(db, id)).toMatchObject({ status: 'executing', step: 'start' });
    expect(h.eventsOf('executor:crash', id)).toHaveLength(1);
  }, 20_000);

  it('a transactional step reached by an inline hand-off commits its row with its outcome', async () => {
    const id = await h.engine.insert(TxInlineFsm, { state: {} });
    expect(await h.engine.await(id, { timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { ended: true },
    });
    expect(await ledger(id)).toEqual([{ step: 'write', attempt: 0 }]);
  });

  it('warns at boot when transactional steps could exhaust the pool', async () => {
    // The test DataSource's pool has 10 connections; 20 steps + the engine's 2 do not fit.
    const warned = await bootEngine(db, [TxLiveFsm], {
      name: 'pool-check',
      queues: { 'tx-live': 20 },
      reaper: false,
      gc: false,
    });
    try {
      const warnings = warned.eventsOf('boot:warning').map((e) => String(e.metadata['warning']));
      expect(warnings).toContainEqual(
        expect.stringContaining('transactional steps on queue(s) "tx-live" may hold 20'),
      );
    } finally {
      await warned.close();
    }
    expect(
      h.eventsOf('boot:warning').filter((e) => String(e.metadata['warning']).includes('pool')),
    ).toEqual([]);
  });

  it('refuses @DurableFsm({ transactional }) on an FSM with steps, at boot', async () => {
    @DurableFsm({ name: 'tx-wrong', queue: 'nowhere', transactional: true })
    class WrongFsm {
      @Step() start() {
        return done({});
      }
    }
    await expect(bootEngine(db, [WrongFsm], { name: 'wrong', queues: {} })).rejects.toThrow(
      ConfigurationError,
    );
  });
});
