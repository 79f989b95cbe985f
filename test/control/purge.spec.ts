import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.8: purge deletes one ended instance with its inbox and history (the
// `instance:purged` event, naming the actor, is the record), refuses a live one naming its
// status; purgeAll deletes the ended rows a filter matches in bounded skip-locked batches, counts
// on a dry run, and runs beside GC without a deadlock. No scheduler runs: rows move only when
// the test drains them. GC runs only when a test sweeps.

@DurableFsm({ name: 'purge-waiter' })
class WaiterFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish() {
    return done({});
  }
}

@DurableFsm({ name: 'purge-quick' })
class QuickFsm {
  @Step() start() {
    return done({ ok: true });
  }
}

@DurableFsm({ name: 'purge-flaky', history: 'full' })
class FlakyFsm {
  @Step() start() {
    return stop('broken on purpose');
  }
}

@DurableFsm({ name: 'purge-parent' })
class ParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren('joined', [{ fsm: WaiterFsm, state: {} }], ctx.state);
  }
  @Step() joined() {
    return done({});
  }
}

@DurableFsm({ name: 'purge-bulk' })
class BulkFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('never', 'start', ctx.state);
  }
}

async function failure(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe('purge / purgeAll (docs/design.md §27.8)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [WaiterFsm, QuickFsm, FlakyFsm, ParentFsm, BulkFsm], {
      queues: {},
      reaper: false,
      // Swept only by the test (retention 1 ms: everything ended is due).
      gc: {
        interval: 3_600_000,
        retention: 1,
        failedRetention: 1,
        cancelledRetention: 1,
        batch: 100,
      },
      poke: 'none',
    });
    gd = GenDurableTesting.forEngine(h.engine);
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    await db?.drop();
  });

  const rowsOf = async (table: string, column: string, id: string): Promise<number> =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${table} WHERE ${column} = $1`,
        [id],
      )
    ).rows[0]!.n;

  it('deletes a done, a failed and a cancelled instance with its inbox and history, naming the actor', async () => {
    const quick = await h.engine.insert(QuickFsm);
    const flaky = await h.engine.insert(FlakyFsm);
    const waiter = await h.engine.insert(WaiterFsm, { correlationKey: 'purge-me' });
    await gd.drain();
    await h.engine.signal(waiter, 'other', { x: 1 });
    await h.engine.cancel(waiter, { actor: 'ops' });
    expect((await h.engine.get(quick))?.status).toBe('done');
    expect((await h.engine.get(flaky))?.status).toBe('failed');
    expect((await h.engine.get(waiter))?.status).toBe('cancelled');
    expect(await rowsOf('gen_durable_signals', 'target_id', waiter)).toBe(1);
    expect(await rowsOf('gen_durable_history', 'instance_id', waiter)).toBeGreaterThan(0);
    expect(await rowsOf('gen_durable_history', 'instance_id', flaky)).toBeGreaterThan(0);

    h.clear();
    await h.engine.purge(quick);
    await h.engine.purge({ id: flaky }, { actor: 'alice' });
    await h.engine.purge({ correlationKey: 'purge-me' }, { actor: 'bob' });
    for (const id of [quick, flaky, waiter]) {
      expect(await h.engine.get(id)).toBeNull();
      expect(await rowsOf('gen_durable_signals', 'target_id', id)).toBe(0);
      expect(await rowsOf('gen_durable_history', 'instance_id', id)).toBe(0);
    }
    expect(h.eventsOf('instance:purged').map((e) => [e.metadata, e.measurements])).toEqual([
      [{ id: quick, fsm: 'purge-quick', status: 'done', actor: null }, { count: 1 }],
      [{ id: flaky, fsm: 'purge-flaky', status: 'failed', actor: 'alice' }, { count: 1 }],
      [{ id: waiter, fsm: 'purge-waiter', status: 'cancelled', actor: 'bob' }, { count: 1 }],
    ]);
    expect(h.statements.filter((s) => s === 'purge_instances')).toHaveLength(3);
  });

  it('refuses a live instance naming its status, a child of a live parent, a missing target and bad options; nothing deleted', async () => {
    const waiter = await h.engine.insert(WaiterFsm);
    await gd.drain();
    const runnable = await h.engine.insert(QuickFsm); // not drained: stays runnable
    const live = await failure(() => h.engine.purge(waiter));
    expect(live).toBeInstanceOf(InvalidInputError);
    expect((live as InvalidInputError).path).toBe('purge.target');
    expect((live as Error).message).toContain('is awaiting_signal');
    expect((await failure(() => h.engine.purge(runnable))) as Error).toBeInstanceOf(
      InvalidInputError,
    );
    expect(((await failure(() => h.engine.purge(runnable))) as Error).message).toContain(
      'is runnable',
    );
    expect((await h.engine.get(waiter))?.status).toBe('awaiting_signal');
    expect((await h.engine.get(runnable))?.status).toBe('runnable');

    // A child cancelled while its parent still lives (awaiting or woken): kept, as GC keeps it.
    const parent = await h.engine.insert(ParentFsm);
    await gd.drain();
    const [child] = (await h.engine.list({ parentId: parent })).items;
    await h.engine.cancel(child!.id);
    const kept = await failure(() => h.engine.purge(child!.id));
    expect(kept).toBeInstanceOf(InvalidInputError);
    expect((kept as Error).message).toContain(`is a child of purge-parent#${parent}`);
    expect((await h.engine.get(child!.id))?.status).toBe('cancelled');

    expect(await failure(() => h.engine.purge('999999999'))).toBeInstanceOf(NoTargetError);
    expect(
      await failure(() => h.engine.purge({ correlationKey: 'nobody-has-this-key' })),
    ).toBeInstanceOf(NoTargetError);
    const bad = await failure(() => h.engine.purge(runnable, { actor: '' }));
    expect((bad as InvalidInputError).path).toBe('purge.actor');
    const unknown = await failure(() => h.engine.purge(runnable, { force: true } as never));
    expect((unknown as InvalidInputError).path).toBe('purge.options.force');
    const target = await failure(() => h.engine.purge({ nope: 1 } as never));
    expect((target as InvalidInputError).path).toBe('purge.target');
  });

  it('purgeAll refuses a live status and an empty filter; a dry run counts the ended matches and deletes nothing', async () => {
    for (const [status, path] of [
      [['done', 'executing'], 'purgeAll.filter.status'],
      ['runnable', 'purgeAll.filter.status'],
    ] as const) {
      const err = await failure(() => h.engine.purgeAll({ status }));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).path).toBe(path);
    }
    expect(((await failure(() => h.engine.purgeAll({}))) as InvalidInputError).path).toBe(
      'purgeAll.filter',
    );
    for (const [options, path] of [
      [{ batchSize: 0 }, 'purgeAll.batchSize'],
      [{ batchSize: 1001 }, 'purgeAll.batchSize'],
      [{ dryRun: 'yes' }, 'purgeAll.dryRun'],
      [{ limit: 3 }, 'purgeAll.options.limit'],
    ] as const) {
      const err = await failure(() => h.engine.purgeAll({ fsm: 'purge-bulk' }, options as never));
      expect((err as InvalidInputError).path).toBe(path);
    }

    const ids = await h.engine.insertAll(
      BulkFsm,
      Array.from({ length: 250 }, (_, i) => ({ state: { i } })),
    );
    await gd.drain();
    await h.engine.cancelAll({ fsm: 'purge-bulk', status: 'awaiting_signal' });
    const live = await h.engine.insert(BulkFsm);
    await gd.drain();
    h.clear();
    expect(await h.engine.purgeAll({ fsm: 'purge-bulk' }, { dryRun: true })).toEqual({
      matched: 250,
      purged: 0,
    });
    expect(h.statements).not.toContain('purge_instances');
    expect((await h.engine.count({ fsm: 'purge-bulk' })).count).toBe(251);

    // Bounded: 250 rows at 100 per statement is three deletes.
    h.clear();
    expect(
      await h.engine.purgeAll({ fsm: 'purge-bulk' }, { batchSize: 100, actor: 'cleanup' }),
    ).toEqual({ matched: 250, purged: 250 });
    expect(h.statements.filter((s) => s === 'purge_instances')).toHaveLength(3);
    const events = h.eventsOf('instance:purged');
    expect(events).toHaveLength(250);
    expect(new Set(events.map((e) => e.metadata['id']))).toEqual(new Set(ids));
    expect(events.every((e) => e.metadata['actor'] === 'cleanup')).toBe(true);
    expect((await h.engine.get(live))?.status).toBe('awaiting_signal');
    expect((await h.engine.count({ fsm: 'purge-bulk' })).count).toBe(1);
    await h.engine.cancel(live);
    expect(await h.engine.purgeAll({ fsm: 'purge-bulk', status: 'cancelled' })).toEqual({
      matched: 1,
      purged: 1,
    });
  });

  it('purgeAll and GC sweeping the same families at once: no deadlock, every row deleted once', async () => {
    const N = 3000;
    const gc = h.engine.runtime.gc!;
    await gc.sweep(); // the ended rows of the tests above, so the sweeps below count only these
    for (let k = 0; k < N; k += 1000) {
      await h.engine.insertAll(
        BulkFsm,
        Array.from({ length: 1000 }, (_, i) => ({ state: { i: k + i } })),
      );
    }
    await gd.drain({ maxSteps: 10_000 });
    await h.engine.cancelAll({ fsm: 'purge-bulk' });
    // Families: each even row the child of the row before it (both ended), so the delete of a
    // parent nulls a child's parent_id that the other sweeper may be deleting.
    await db.pool.query(
      `UPDATE gen_durable SET parent_id = id - 1 WHERE fsm = 'purge-bulk' AND id % 2 = 0
          AND EXISTS (SELECT 1 FROM gen_durable p WHERE p.id = gen_durable.id - 1 AND p.fsm = 'purge-bulk')`,
    );
    const [a, b, swept1, swept2] = await Promise.all([
      h.engine.purgeAll({ fsm: 'purge-bulk' }, { batchSize: 50 }),
      h.engine.purgeAll({ fsm: 'purge-bulk' }, { batchSize: 70 }),
      gc.sweep(),
      gc.sweep(),
    ]);
    // A row skipped as locked is left for a later call: finish, then count.
    const rest = await h.engine.purgeAll({ fsm: 'purge-bulk' });
    const after = await gc.sweep();
    expect(a.purged + b.purged + rest.purged + swept1 + swept2 + after).toBe(N);
    expect((await h.engine.count({ fsm: 'purge-bulk' })).count).toBe(0);
    const { rows } = await db.pool.query<{ deadlocks: string }>(
      'SELECT deadlocks::text AS deadlocks FROM pg_stat_database WHERE datname = current_database()',
    );
    expect(rows[0]!.deadlocks).toBe('0');
  }, 120_000);
});
