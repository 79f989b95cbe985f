import { done, DurableFsm, next, Step, type StepContext } from '../../lib';
import {
  BACKGROUND_LOOKS,
  bootEngine,
  claimRows,
  execute,
  Gates,
  type Harness,
} from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §24.1 / §25.1: hot-path statement counts are a tested contract. Counts come from the
// SqlExecutor's statement hook (every statement, BEGIN/COMMIT included).

const gates = new Gates();

@DurableFsm({ name: 'held', queue: 'counts' })
class HeldFsm {
  @Step() async start(ctx: StepContext<{ key: string }>) {
    await gates.wait(ctx.state.key);
    return done({});
  }
}

@DurableFsm({ name: 'stepper', queue: 'manual' })
class StepperFsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return next('second', { n: ctx.state.n + 1 });
  }
  @Step() second() {
    return done({});
  }
}

/** Statement names and pick:stop events in the order they happened. */
function timeline(h: Harness): { log: string[]; stop: () => void } {
  const log: string[] = [];
  const off = h.engine.runtime.sql.onStatement((s) => {
    if (!BACKGROUND_LOOKS.has(s.name)) log.push(s.name);
  });
  const sub = h.engine.events$.subscribe((e) => {
    if (e.event === 'pick:stop') log.push(`pick:stop(${e.measurements['count']})`);
  });
  return {
    log,
    stop: () => {
      off();
      sub.unsubscribe();
    },
  };
}

describe('statement counts (docs/design.md §25.1)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('a scheduler pick', () => {
    let h: Harness;
    afterEach(async () => {
      gates.openAll();
      await h?.close();
    });

    it('an empty pick is 1 statement (claim_runnable)', async () => {
      h = await bootEngine(db, [HeldFsm], {
        queues: { counts: 3 },
        reaper: false,
        gc: false,
        poke: 'none',
        pollInterval: 30,
        maxPollInterval: 30,
      });
      const t = timeline(h);
      // Wait for four empty picks after the recording started.
      await h.waitFor(
        'pick:stop',
        () => t.log.filter((l) => l.startsWith('pick:stop')).length >= 4,
        10_000,
      );
      t.stop();
      const firstPick = t.log.findIndex((l) => l.startsWith('pick:stop'));
      const windows: string[][] = [];
      let current: string[] = [];
      for (const entry of t.log.slice(firstPick + 1)) {
        if (entry.startsWith('pick:stop')) {
          windows.push(current);
          current = [];
        } else current.push(entry);
      }
      expect(windows.length).toBeGreaterThanOrEqual(3);
      for (const w of windows) expect(w).toEqual(['claim_runnable']);
      expect(
        t.log.filter((l) => l.startsWith('pick:stop')).every((l) => l === 'pick:stop(0)'),
      ).toBe(true);
    });

    it('a pick with claims is 1 statement (the claim carries the enrichment) for any batch', async () => {
      h = await bootEngine(db, [HeldFsm], {
        queues: { counts: 5 },
        reaper: false,
        gc: false,
        poke: 'local',
        leaseTtl: 60_000,
        heartbeatInterval: 20_000,
        pollInterval: 60_000,
        maxPollInterval: 60_000,
      });
      await h.waitFor('pick:stop'); // the boot poll (empty)
      const t = timeline(h);
      const keys = ['c1', 'c2', 'c3', 'c4', 'c5'];
      await h.engine.insertAll(
        HeldFsm,
        keys.map((key) => ({ state: { key } })),
      );
      await Promise.all(keys.map((k) => gates.reached(k)));
      t.stop();
      expect(t.log).toEqual(['insert_unkeyed_instances', 'claim_runnable', 'pick:stop(5)']);
    });
  });

  describe('without a scheduler (queues: {})', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [StepperFsm], { queues: {}, reaper: false, gc: false });
    });
    afterAll(async () => {
      await h.close();
    });

    it.each([3, 30])(
      'a flush of %i `next` outcomes is 1 statement (the UPDATE, autocommit)',
      async (n) => {
        const queue = `flush-${n}`;
        await h.engine.insertAll(
          StepperFsm,
          Array.from({ length: n }, (_, i) => ({ state: { n: i }, queue })),
        );
        const rows = await claimRows(h.engine, queue, n, `counts-${n}`);
        expect(rows).toHaveLength(n);
        h.clear();
        const replies = await Promise.all(rows.map((row) => execute(h.engine, row)));
        expect(replies).toEqual(Array.from({ length: n }, () => 'committed'));
        expect(h.statements).toEqual(['flush_transitions']);
        const { rows: after } = await db.pool.query(
          `SELECT count(*)::int AS n FROM gen_durable WHERE id = ANY($1::bigint[]) AND status = 'runnable' AND step = 'second'`,
          [rows.map((r) => r.id)],
        );
        expect(after[0].n).toBe(n);
      },
    );

    it('terminal flushes: rows never signaled in 1 statement; a signaled row adds a transaction with its inbox sweep', async () => {
      const queue = 'terminals';
      await h.engine.insertAll(
        StepperFsm,
        [0, 1, 2].map((n) => ({ state: { n }, queue })),
      );
      const first = await claimRows(h.engine, queue, 3, 'counts-t');
      expect(await Promise.all(first.map((row) => execute(h.engine, row)))).toEqual([
        'committed',
        'committed',
        'committed',
      ]);
      const second = await claimRows(h.engine, queue, 3, 'counts-t');
      expect(second.map((r) => r.step)).toEqual(['second', 'second', 'second']);
      // A signal reaches the middle row while its step runs.
      await h.engine.signal({ id: second[1]!.id }, 'late', {});
      h.clear();
      expect(await Promise.all(second.map((row) => execute(h.engine, row)))).toEqual([
        'committed',
        'committed',
        'committed',
      ]);
      // Every entry is `done`: FLUSH_DONE, the transitions write without its per-kind CASEs.
      expect(h.statements).toEqual([
        'flush_done',
        'begin',
        'flush_done',
        'consume_inboxes',
        'commit',
      ]);
      const { rows } = await db.pool.query(
        `SELECT g.status, count(s.id) FILTER (WHERE s.consumed_at IS NULL)::int AS unconsumed
           FROM gen_durable g LEFT JOIN gen_durable_signals s ON s.target_id = g.id
          WHERE g.id = ANY($1::bigint[]) GROUP BY g.id, g.status ORDER BY g.id`,
        [second.map((r) => r.id)],
      );
      expect(rows).toEqual([0, 1, 2].map(() => ({ status: 'done', unconsumed: 0 })));

      // Without any signal, three terminals are the UPDATE alone.
      await h.engine.insertAll(
        StepperFsm,
        [0, 1, 2].map((n) => ({ state: { n }, queue })),
      );
      const again = await claimRows(h.engine, queue, 3, 'counts-t');
      await Promise.all(again.map((row) => execute(h.engine, row)));
      const last = await claimRows(h.engine, queue, 3, 'counts-t');
      h.clear();
      expect(await Promise.all(last.map((row) => execute(h.engine, row)))).toEqual([
        'committed',
        'committed',
        'committed',
      ]);
      expect(h.statements).toEqual(['flush_done']);
    });

    it('insertAll of 6 000 rows is 1 statement', async () => {
      h.clear();
      const ids = await h.engine.insertAll(
        StepperFsm,
        Array.from({ length: 6000 }, (_, i) => ({
          state: { n: i },
          queue: 'bulk',
          correlationKey: `bulk-${i}`,
        })),
      );
      expect(h.statements).toEqual(['insert_instances']);
      expect(new Set(ids).size).toBe(6000);
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS n FROM gen_durable WHERE queue = 'bulk'`,
      );
      expect(rows[0].n).toBe(6000);
    });

    it('insert is 1 statement and signal is 1 statement', async () => {
      h.clear();
      const id = await h.engine.insert(StepperFsm, { state: { n: 0 }, queue: 'signals' });
      expect(h.statements).toEqual(['insert_instance']);
      h.clear();
      await h.engine.signal({ id }, 'hello', { x: 1 });
      expect(h.statements).toEqual(['deliver_signal']);
      const { rows } = await db.pool.query(
        `SELECT name, payload FROM gen_durable_signals WHERE target_id = $1`,
        [id],
      );
      expect(rows).toEqual([{ name: 'hello', payload: { x: 1 } }]);
    });

    it('cancel of a row that is not executing is 1 statement (docs/design.md §27.2)', async () => {
      const id = await h.engine.insert(StepperFsm, { state: { n: 0 }, queue: 'cancels' });
      await h.engine.signal({ id }, 'hello', {});
      h.clear();
      expect(await h.engine.cancel(id, { reason: 'count me' })).toEqual({
        cancelled: [id],
        requested: [],
        alreadyTerminal: [],
      });
      expect(h.statements).toEqual(['cancel_instances']);
      const { rows } = await db.pool.query(
        `SELECT g.status::text, count(s.id) FILTER (WHERE s.consumed_at IS NULL)::int AS unconsumed
           FROM gen_durable g LEFT JOIN gen_durable_signals s ON s.target_id = g.id WHERE g.id = $1 GROUP BY g.id`,
        [id],
      );
      expect(rows).toEqual([{ status: 'cancelled', unconsumed: 0 }]);
    });
  });
});
