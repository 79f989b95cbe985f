import { awaitSignal, DurableFsm, done, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

@DurableFsm({ name: 'topology_flow', queue: 'topo' })
class TopologyFlow {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<{ n: number }>) {
    return done({ n: ctx.state.n, go: ctx.awaited[0]?.payload ?? null });
  }
}

const WEB = { queues: {}, reaper: false, gc: false } as const;

// docs/design.md §19: worker, web and maintenance nodes are the same module with different `queues`,
// `reaper` and `gc`. Rows carry no engine affinity, so engines with different names on one
// database stand in for nodes here (the multi-process test runs them as real processes).
describe('topologies', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe('a web node', () => {
    let web: Harness;
    let early = '';
    beforeAll(async () => {
      web = await bootEngine(db, [TopologyFlow], { name: 'Web', ...WEB });
    });
    afterAll(async () => {
      await web.close();
    });

    it('inserts, signals, gets and awaits without running anything', async () => {
      expect(web.engine.runtime.schedulers.size).toBe(0);
      expect(web.engine.runtime.reaper).toBeUndefined();
      expect(web.engine.runtime.gc).toBeUndefined();
      web.clear();
      const id = await web.engine.insert('topology_flow', { state: { n: 1 } });
      early = id;
      await web.engine.signal({ id }, 'go', { early: true });
      expect(await web.engine.await(id, { timeout: 300 })).toEqual({
        kind: 'busy',
        snapshot: { status: 'runnable', step: 'start', attempt: 0 },
      });
      expect(await web.engine.get({ id })).toMatchObject({ status: 'runnable', lockedBy: null });
      expect(web.statements.filter((s) => /claim|heartbeat|reap|gc_/.test(s))).toEqual([]);
      expect(web.eventsOf('boot:warning')).toEqual([]);
    });

    it('a worker node elsewhere runs what the web node inserted; the web node awaits the result', async () => {
      const worker = await bootEngine(db, [TopologyFlow], {
        name: 'Worker',
        queues: { topo: 2 },
        reaper: false,
        gc: false,
      });
      try {
        const id = await web.engine.insert(TopologyFlow, { state: { n: 2 } });
        expect(await web.engine.await(id, { timeout: 15_000 })).toEqual({
          kind: 'awaiting',
          snapshot: { status: 'awaiting_signal', step: 'finish', attempt: 0 },
        });
        await web.engine.signal({ id }, 'go', { from: 'web' });
        expect(await web.engine.await(id, { timeout: 15_000, until: 'terminal' })).toEqual({
          kind: 'done',
          result: { n: 2, go: { from: 'web' } },
        });
        // The instance the web node inserted and signalled before any worker existed ran too.
        expect(await web.engine.await(early, { timeout: 15_000, until: 'terminal' })).toEqual({
          kind: 'done',
          result: { n: 1, go: { early: true } },
        });
      } finally {
        await worker.close();
      }
    });
  });

  describe('boot warning', () => {
    it("warns when this node runs queues with poke 'local' and no reaper", async () => {
      const h = await bootEngine(db, [TopologyFlow], {
        name: 'LonelyWorker',
        queues: { topo: 1 },
        reaper: false,
        gc: false,
        poke: 'local',
      });
      try {
        const warnings = h.eventsOf('boot:warning').map((e) => String(e.metadata['warning']));
        expect(warnings.some((w) => /poke 'local' and no reaper/.test(w))).toBe(true);
      } finally {
        await h.close();
      }
    });

    it('does not warn with a cross-node poke, or on a node that runs a reaper', async () => {
      const a = await bootEngine(db, [TopologyFlow], {
        name: 'PgWorker',
        queues: { topo: 1 },
        reaper: false,
        gc: false,
        poke: 'postgres',
      });
      const b = await bootEngine(db, [TopologyFlow], {
        name: 'FullNode',
        queues: { topo: 1 },
        poke: 'local',
      });
      try {
        for (const h of [a, b]) {
          expect(
            h
              .eventsOf('boot:warning')
              .filter((e) => /no reaper/.test(String(e.metadata['warning']))),
          ).toEqual([]);
        }
      } finally {
        await a.close();
        await b.close();
      }
    });
  });

  describe('several maintenance nodes at once', () => {
    let m1: Harness;
    let m2: Harness;
    beforeAll(async () => {
      // Timers far away: the test drives the sweeps so they overlap on purpose.
      const maintenance = {
        queues: {},
        reaper: { interval: 600_000 },
        gc: { interval: 600_000, retention: 3_600_000, batch: 250 },
      };
      m1 = await bootEngine(db, [TopologyFlow], { name: 'Maint1', ...maintenance });
      m2 = await bootEngine(db, [TopologyFlow], { name: 'Maint2', ...maintenance });
    });
    afterAll(async () => {
      await m1.close();
      await m2.close();
    });

    it('two reapers racing reap every expired lease exactly once', async () => {
      const ids = await m1.engine.insertAll(
        TopologyFlow,
        Array.from({ length: 2_000 }, (_, n) => ({ state: { n }, queue: 'reap-race' })),
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'executing', locked_by = 'dead-node', lease_expires_at = now() - interval '1 second', claim_seq = claim_seq + 1
          WHERE id = ANY($1::bigint[])`,
        [ids],
      );
      const [r1, r2, r3, r4] = await Promise.all([
        m1.engine.runtime.reaper!.sweep(),
        m2.engine.runtime.reaper!.sweep(),
        m1.engine.runtime.reaper!.sweep(),
        m2.engine.runtime.reaper!.sweep(),
      ]);
      expect(r1.reaped + r2.reaped + r3.reaped + r4.reaped).toBe(2_000);
      const rows = (
        await db.pool.query<{ status: string; attempt: number; n: string }>(
          `SELECT status, attempt, count(*) AS n FROM gen_durable WHERE id = ANY($1::bigint[]) GROUP BY status, attempt`,
          [ids],
        )
      ).rows;
      expect(rows).toEqual([{ status: 'runnable', attempt: 1, n: '2000' }]);
    });

    it('two GCs racing delete every old terminal row exactly once', async () => {
      const ids = await m1.engine.insertAll(
        TopologyFlow,
        Array.from({ length: 2_000 }, (_, n) => ({ state: { n }, queue: 'gc-race' })),
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', result = '{}', updated_at = now() - interval '2 days' WHERE id = ANY($1::bigint[])`,
        [ids],
      );
      const counts = await Promise.all([
        m1.engine.runtime.gc!.sweep(),
        m2.engine.runtime.gc!.sweep(),
      ]);
      expect(counts[0] + counts[1]).toBe(2_000);
      await eventually(async () => {
        const left = (
          await db.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM gen_durable WHERE id = ANY($1::bigint[])`,
            [ids],
          )
        ).rows;
        return left[0]?.n === '0';
      });
    });
  });
});
