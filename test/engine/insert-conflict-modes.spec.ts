import {
  DuplicateError,
  DurableFsm,
  InvalidInputError,
  next,
  done,
  Step,
  type StepContext,
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

// insert's conflict modes on the correlation key (docs/identity.md "Conflict modes"): skip,
// debounce (a never-started occupant takes the new state and moves; a started one is
// answered), replace (the occupant cancelled cooperatively, the new one inserted), on real
// connections; the races ordered by holding a transaction open.

const gates = new Gates();

@DurableFsm({ name: 'debounced', queue: 'nowhere' })
class WorkFsm {
  @Step() async start(ctx: StepContext<{ v: number; gate?: string }>) {
    if (ctx.state.gate !== undefined) await gates.wait(ctx.state.gate);
    return next('finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<{ v: number }>) {
    return done({ v: ctx.state.v });
  }
}

describe('insert conflict modes (docs/identity.md)', () => {
  let db: TestDatabase;
  let h: Harness;
  let n = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [WorkFsm], { queues: {}, reaper: false, gc: false, poke: 'none' });
  });
  afterAll(async () => {
    gates.openAll();
    await h.close();
    await db.drop();
  });

  const live = async (key: string): Promise<number> => {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gen_durable WHERE correlation_key = $1
          AND status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')`,
      [key],
    );
    return rows[0]!.n;
  };

  /** Resolves once a backend of the test database waits on a lock. */
  const blocked = (): Promise<boolean> =>
    eventually(async () => {
      const { rows } = await db.pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return rows.length > 0;
    });

  it("'skip' answers the occupant and stores nothing; 'return' is its alias", async () => {
    const key = `skip-${++n}`;
    const id = await h.engine.insert(WorkFsm, { correlationKey: key, state: { v: 1 } });
    expect(await h.engine.insert(WorkFsm, { correlationKey: key, onConflict: 'skip' })).toBe(id);
    expect(await h.engine.insert(WorkFsm, { correlationKey: key, onConflict: 'return' })).toBe(id);
    expect(await live(key)).toBe(1);
    expect((await rowOf(db, id))['state']).toEqual({ v: 1 });
  });

  it('debounce: the never-started occupant takes the new state and moves, bounded by maxDelayMs', async () => {
    const key = `deb-${++n}`;
    const id = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      state: { v: 1 },
      onConflict: 'debounce',
      debounceMs: 60_000,
      maxDelayMs: 120_000,
    });
    const first = await rowOf(db, id);
    const firstDelay =
      (first['eligible_at'] as Date).getTime() - (first['inserted_at'] as Date).getTime();
    expect(firstDelay).toBeGreaterThanOrEqual(59_000);
    expect(firstDelay).toBeLessThanOrEqual(61_000);
    const again = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      state: { v: 2 },
      onConflict: 'debounce',
      debounceMs: 100_000,
      maxDelayMs: 120_000,
    });
    expect(again).toBe(id);
    const row = await rowOf(db, id);
    expect(row['state']).toEqual({ v: 2 });
    // now + 100 s, but not past the first insert + 120 s.
    const moved = (row['eligible_at'] as Date).getTime() - (row['inserted_at'] as Date).getTime();
    expect(moved).toBeGreaterThan(firstDelay + 30_000);
    expect(moved).toBeLessThanOrEqual(120_000);
    // First inserted 100 s ago: now + 60 s is past its insert + 120 s.
    await db.pool.query(
      `UPDATE gen_durable SET inserted_at = inserted_at - interval '100 seconds' WHERE id = $1`,
      [id],
    );
    await h.engine.insert(WorkFsm, {
      correlationKey: key,
      state: { v: 3 },
      onConflict: 'debounce',
      debounceMs: 60_000,
      maxDelayMs: 120_000,
    });
    const bounded = await rowOf(db, id);
    expect(bounded['state']).toEqual({ v: 3 });
    expect(
      (bounded['eligible_at'] as Date).getTime() - (bounded['inserted_at'] as Date).getTime(),
    ).toBe(120_000);
    expect(await live(key)).toBe(1);
  });

  it('debounce: an occupant that started is answered and keeps its state; nothing is stored', async () => {
    const key = `deb-${++n}`;
    const queue = `deb-q-${n}`;
    const tag = `g${n}`;
    const id = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      queue,
      state: { v: 1, gate: tag },
    });
    const [row] = await claimRows(h.engine, queue, 1, 'w');
    const reply = execute(h.engine, row!);
    await gates.reached(tag);
    expect(
      await h.engine.insert(WorkFsm, {
        correlationKey: key,
        queue,
        state: { v: 2 },
        onConflict: 'debounce',
        debounceMs: 1000,
      }),
    ).toBe(id);
    gates.open(tag);
    await reply;
    expect((await rowOf(db, id))['state']).toMatchObject({ v: 1 });
    expect(await live(key)).toBe(1);
  });

  it('two debounced inserts racing: one occupant, with the later one state', async () => {
    const key = `deb-race-${++n}`;
    const runner = (await db.dataSource()).createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      const firstId = await h.engine.insert(WorkFsm, {
        correlationKey: key,
        state: { v: 1 },
        onConflict: 'debounce',
        debounceMs: 60_000,
        manager: runner.manager,
      });
      // The second waits on the first's uncommitted key, then debounces it.
      const second = h.engine.insert(WorkFsm, {
        correlationKey: key,
        state: { v: 2 },
        onConflict: 'debounce',
        debounceMs: 60_000,
      });
      await blocked();
      await runner.commitTransaction();
      expect(await second).toBe(firstId);
      expect((await rowOf(db, firstId))['state']).toEqual({ v: 2 });
      expect(await live(key)).toBe(1);
    } finally {
      await runner.release();
    }
  });

  it('replace: a waiting occupant is cancelled now and the new one inserted', async () => {
    const key = `rep-${++n}`;
    const old = await h.engine.insert(WorkFsm, { correlationKey: key, state: { v: 1 } });
    const id = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      state: { v: 2 },
      onConflict: 'replace',
    });
    expect(id).not.toBe(old);
    expect(await rowOf(db, old)).toMatchObject({ status: 'cancelled', cancel_reason: 'replaced' });
    expect((await h.engine.get({ correlationKey: key }))?.id).toBe(id);
    expect(await live(key)).toBe(1);
    const history = await h.engine.history(old);
    expect(history.map((e) => e.kind)).toContain('manual.cancel');
  });

  it('replace racing the occupant step: the occupant ends cancelled; exactly one live instance after', async () => {
    const key = `rep-${++n}`;
    const queue = `rep-q-${n}`;
    const tag = `g${n}`;
    const old = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      queue,
      state: { v: 1, gate: tag },
    });
    const [row] = await claimRows(h.engine, queue, 1, 'w');
    const reply = execute(h.engine, row!);
    await gates.reached(tag);
    const id = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      queue,
      state: { v: 2 },
      onConflict: 'replace',
    });
    expect(await rowOf(db, old)).toMatchObject({ status: 'executing', cancel_reason: 'replaced' });
    expect(await live(key)).toBe(2);
    gates.open(tag);
    expect(await reply).toBe('cancelled');
    expect(await rowOf(db, old)).toMatchObject({ status: 'cancelled', step: 'start' });
    expect(await live(key)).toBe(1);
    expect((await h.engine.get({ correlationKey: key }))?.id).toBe(id);
  });

  it('replace racing a concurrent insert of the key: one live instance', async () => {
    const key = `rep-${++n}`;
    const runner = (await db.dataSource()).createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    try {
      const first = await h.engine.insert(WorkFsm, {
        correlationKey: key,
        manager: runner.manager,
      });
      const second = h.engine.insert(WorkFsm, { correlationKey: key, onConflict: 'replace' });
      await blocked();
      await runner.commitTransaction();
      const id = await second;
      expect(id).not.toBe(first);
      expect((await rowOf(db, first))['status']).toBe('cancelled');
      expect(await live(key)).toBe(1);
    } finally {
      await runner.release();
    }
  });

  it('replace does not replace an ended occupant whose scope keeps the key', async () => {
    const key = `rep-${++n}`;
    const id = await h.engine.insert(WorkFsm, {
      correlationKey: key,
      correlationScope: [
        'runnable',
        'executing',
        'awaiting_signal',
        'awaiting_children',
        'cancelled',
      ],
    });
    await h.engine.cancel(id);
    await expect(
      h.engine.insert(WorkFsm, { correlationKey: key, onConflict: 'replace' }),
    ).rejects.toThrow(DuplicateError);
  });

  it('checks the options', async () => {
    await expect(
      h.engine.insert(WorkFsm, { correlationKey: 'x', onConflict: 'debounce' }),
    ).rejects.toThrow(InvalidInputError);
    await expect(h.engine.insert(WorkFsm, { correlationKey: 'x', debounceMs: 5 })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(
      h.engine.insert(WorkFsm, {
        correlationKey: 'x',
        onConflict: 'debounce',
        debounceMs: 100,
        maxDelayMs: 50,
      }),
    ).rejects.toThrow(InvalidInputError);
    await expect(
      h.engine.insert(WorkFsm, {
        correlationKey: 'x',
        onConflict: 'debounce',
        debounceMs: 100,
        scheduleIn: 5,
      }),
    ).rejects.toThrow(InvalidInputError);
    await expect(h.engine.insertAll(WorkFsm, [{ onConflict: 'skip' }])).rejects.toThrow(
      InvalidInputError,
    );
  });
});
