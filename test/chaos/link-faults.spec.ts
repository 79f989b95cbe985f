import { DataSource } from 'typeorm';
import { Pool } from 'pg';

import { done, DurableFsm, scheduleChildren, Step, type StepContext } from '../../lib';
import { migrateUp } from '../../lib/schema/migrator';
import { bootEngine, eventually, Gates, type Harness, sleep } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { freePort } from '../limits/support/private-redis';
import { PrivateCluster } from './harness/pg-cluster';
import { simpleQuery, StatementProxy, statementNamed } from './support/statement-proxy';

// Link faults at the protocol step where they are ambiguous for the client (docs/reliability.md,
// findings F-R8, F-R9, F-R10): a TCP reset after the server received a COMMIT (or an autocommit
// flush), a link that goes dark right after a statement inside a flush transaction, and
// PostgreSQL stopped for 5 s while a step runs. A loopback proxy that reads the frontend
// protocol injects each fault right after the chosen statement.

/** Executions per `id:step`, across every engine in this file. */
const runs = new Map<string, number>();
const ran = (ctx: StepContext<unknown>, step: string): void => {
  const key = `${ctx.id}:${step}`;
  runs.set(key, (runs.get(key) ?? 0) + 1);
};
const gates = new Gates();

@DurableFsm({ name: 'link_solo', queue: 'link-q' })
class SoloFsm {
  @Step() async start(ctx: StepContext<{ gate?: string }>) {
    ran(ctx, 'start');
    if (ctx.state.gate) await gates.wait(ctx.state.gate);
    return done({ ok: true });
  }
}

type ChildState = { ms: number };

@DurableFsm({ name: 'link_child', queue: 'link-q' })
class ChildFsm {
  @Step() async start(ctx: StepContext<ChildState>) {
    ran(ctx, 'start');
    if (ctx.state.ms > 0) await sleep(ctx.state.ms);
    return done({ child: ctx.id });
  }
}

@DurableFsm({ name: 'link_parent', queue: 'parent-q' })
class ParentFsm {
  @Step() start(ctx: StepContext<{ children: number; ms: number; queue: string }>) {
    ran(ctx, 'start');
    const children = Array.from({ length: ctx.state.children }, () => ({
      fsm: ChildFsm,
      queue: ctx.state.queue,
      state: { ms: ctx.state.ms },
    }));
    return scheduleChildren('joined', children, ctx.state);
  }
  @Step() joined(ctx: StepContext<unknown>) {
    ran(ctx, 'joined');
    return done({ joined: true });
  }
}

/** A TestDatabase whose DataSource reaches the server through `proxy`. */
async function throughProxy(
  db: TestDatabase,
  proxy: StatementProxy,
): Promise<{ db: TestDatabase; close(): Promise<void> }> {
  const url = new URL(db.url);
  url.port = String(proxy.port);
  const ds = new DataSource({ type: 'postgres', url: url.toString(), poolSize: 10 });
  await ds.initialize();
  trackResource(`proxied DataSource ${db.name}`, () => ds.isInitialized);
  return {
    db: { ...db, name: `${db.name} via proxy`, dataSource: () => Promise.resolve(ds) },
    close: async () => {
      if (ds.isInitialized) await ds.destroy();
    },
  };
}

async function rowsOf(pool: Pool, ids: readonly string[]): Promise<Record<string, unknown>[]> {
  const { rows } = await pool.query<Record<string, unknown>>(
    `SELECT id::text, status, attempt, reaps, locked_by FROM gen_durable WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows;
}

const serverPort = (db: TestDatabase): number => Number(new URL(db.url).port || 5432);

describe('TCP reset after the server received the flush (F-R8)', () => {
  let db: TestDatabase;
  let proxy: StatementProxy;
  let proxied: { db: TestDatabase; close(): Promise<void> };
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await StatementProxy.start(serverPort(db));
    proxied = await throughProxy(db, proxy);
    // A lease long enough that a lost outcome would sit out the test rather than be reaped.
    h = await bootEngine(proxied.db, [SoloFsm, ChildFsm, ParentFsm], {
      queues: { 'link-q': 2, 'parent-q': 1 },
      leaseTtl: 20_000,
      heartbeatInterval: 5_000,
      poke: 'local',
    });
  });
  afterAll(async () => {
    await h.close();
    await proxied.close();
    await proxy.close();
    await db.drop();
  });

  const expectCleanRun = async (ids: readonly string[], steps: readonly string[]) => {
    for (const id of ids) {
      expect(await h.engine.await(id, { until: 'terminal', timeout: 15_000 })).toMatchObject({
        kind: 'done',
      });
    }
    for (const id of ids) for (const step of steps) expect(runs.get(`${id}:${step}`)).toBe(1);
    expect(
      (await rowsOf(db.pool, ids)).map((r) => [r['status'], r['attempt'], r['reaps']]),
    ).toEqual(ids.map(() => ['done', 0, 0]));
    expect(h.eventsOf('flush:error')).toEqual([]);
    expect(h.eventsOf('executor:crash')).toEqual([]);
    expect(h.eventsOf('reaper:reaped')).toEqual([]);
  };

  it('an autocommit flush whose answer is reset: committed once, the step not re-run, no reap', async () => {
    h.clear();
    proxy.fired = 0;
    proxy.arm('reset-after-reply', statementNamed('flush_done'));
    const id = await h.engine.insert(SoloFsm);
    await expectCleanRun([id], ['start']);
    expect(proxy.fired).toBe(1);
  });

  it('a flush transaction reset after the server answered its COMMIT: committed once, no re-run, no reap', async () => {
    h.clear();
    proxy.fired = 0;
    // The first flush transaction is the parent's fan-out (BEGIN … INSERT children … COMMIT);
    // the children's terminal flushes join their parent in one too.
    proxy.arm('reset-after-reply', simpleQuery('COMMIT'));
    const parent = await h.engine.insert(ParentFsm, {
      state: { children: 3, ms: 0, queue: 'link-q' },
    });
    await eventually(async () => (await h.engine.get({ id: parent }))?.status === 'done', 15_000);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id::text FROM gen_durable WHERE parent_id = $1`,
      [parent],
    );
    expect(proxy.fired).toBe(1);
    await expectCleanRun([parent], ['start', 'joined']);
    await expectCleanRun(
      rows.map((r) => r.id),
      ['start'],
    );
  });

  it('a reset right after the flush was sent (the server may or may not have run it): still once', async () => {
    h.clear();
    proxy.fired = 0;
    const ids: string[] = [];
    for (const match of [statementNamed('flush_done'), simpleQuery('COMMIT')]) {
      proxy.arm('reset-after-send', match);
      if (ids.length === 0) ids.push(await h.engine.insert(SoloFsm));
      else {
        const parent = await h.engine.insert(ParentFsm, {
          state: { children: 1, ms: 0, queue: 'link-q' },
        });
        ids.push(parent);
      }
      await h.engine.await(ids.at(-1)!, { until: 'terminal', timeout: 15_000 });
    }
    expect(proxy.fired).toBe(2);
    await expectCleanRun(ids.slice(0, 1), ['start']);
    await expectCleanRun(ids.slice(1), ['start', 'joined']);
  });

  it('five resets in a row fail nothing: five rows reset once each, then one row reset five times', async () => {
    h.clear();
    proxy.fired = 0;
    proxy.arm('reset-after-reply', statementNamed('flush_done'), 5);
    const each: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = await h.engine.insert(SoloFsm);
      await h.engine.await(id, { until: 'terminal', timeout: 15_000 });
      each.push(id);
    }
    expect(proxy.fired).toBe(5);
    await expectCleanRun(each, ['start']);

    // One outcome whose flush and every retry are reset, five times over.
    const gate = 'five-resets';
    const id = await h.engine.insert(SoloFsm, { state: { gate } });
    await gates.reached(gate);
    proxy.arm('reset-after-reply', statementNamed('flush_done'), 5);
    gates.open(gate);
    // The first attempt committed; the retries find the claim spent and answer stale.
    await h.waitFor('outcome:stale', (e) => e.metadata['id'] === id);
    expect(proxy.fired).toBe(10);
    await expectCleanRun([id], ['start']);
  });
});

describe('one worker blackholed inside a flush transaction (F-R9)', () => {
  let db: TestDatabase;
  let proxy: StatementProxy;
  let proxied: { db: TestDatabase; close(): Promise<void> };
  let healthy: Harness;
  let dark: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await StatementProxy.start(serverPort(db));
    proxied = await throughProxy(db, proxy);
    // Default timings (lease 60 s, statementTimeout 30 s, heartbeat 20 s, reaper 30 s).
    healthy = await bootEngine(
      db,
      [ChildFsm, ParentFsm],
      { queues: { 'join-q': 4, 'parent-q': 1 }, nodeId: 'healthy-node' },
      { raw: true },
    );
    dark = await bootEngine(
      proxied.db,
      [ChildFsm, ParentFsm],
      {
        name: 'Dark',
        queues: { 'join-q': 2 },
        nodeId: 'dark-node',
        prefetch: 0,
        pollInterval: 100,
      },
      { raw: true },
    );
  });
  afterAll(async () => {
    proxy.heal();
    await dark?.close();
    await healthy?.close();
    await proxied.close();
    await proxy.close();
    await db.drop();
  });

  it("the healthy worker's commits never stop for more than 5 s, and none of its rows is reaped", async () => {
    // The dark worker's first child to finish sends its parent decrement (JOIN_PARENTS holds
    // the parent's row lock) and its link goes dark: every other child's flush needs that lock.
    proxy.arm('blackhole-after-send', statementNamed('join_parents'));
    const CHILDREN = 80;
    const parent = await healthy.engine.insert(ParentFsm, {
      state: { children: CHILDREN, ms: 100, queue: 'join-q' },
    });
    await eventually(() => Promise.resolve(proxy.isDark || undefined), 30_000);
    const darkAt = Date.now();
    const heldByDark = async (): Promise<number> =>
      Number(
        (
          await db.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM gen_durable WHERE parent_id = $1 AND status = 'executing' AND locked_by LIKE '%dark-node%'`,
            [parent],
          )
        ).rows[0]!.n,
      );
    // Sample the children the healthy worker committed until it has done all it can.
    let last = -1;
    let lastChange = Date.now();
    let longestGap = 0;
    for (;;) {
      const { rows } = await db.pool.query<{ done: string; left: string }>(
        `SELECT count(*) FILTER (WHERE status = 'done') AS done,
                count(*) FILTER (WHERE status <> 'done') AS left
           FROM gen_durable WHERE parent_id = $1`,
        [parent],
      );
      const doneCount = Number(rows[0]!.done);
      const now = Date.now();
      if (doneCount !== last) {
        longestGap = Math.max(longestGap, now - lastChange);
        last = doneCount;
        lastChange = now;
      } else {
        longestGap = Math.max(longestGap, now - lastChange);
      }
      if (Number(rows[0]!.left) <= (await heldByDark())) break;
      if (now - darkAt > 90_000) throw new Error(`the healthy worker stalled: ${doneCount} done`);
      await sleep(100);
    }
    expect(proxy.isDark).toBe(true);
    expect(longestGap).toBeLessThanOrEqual(5_000);
    const { rows } = await db.pool.query<{ reaped: string; healthy_live: string }>(
      `SELECT count(*) FILTER (WHERE reaps > 0) AS reaped,
              count(*) FILTER (WHERE status <> 'done' AND COALESCE(locked_by, '') NOT LIKE '%dark-node%') AS healthy_live
         FROM gen_durable WHERE parent_id = $1 OR id = $1`,
      [parent],
    );
    expect(rows[0]).toEqual({ reaped: '0', healthy_live: '1' }); // the parent, still awaiting
    expect(healthy.eventsOf('reaper:reaped')).toEqual([]);
    expect(healthy.eventsOf('flush:error')).toEqual([]);
  }, 150_000);
});

describe('PostgreSQL stopped for 5 s while a step runs (F-R10)', () => {
  let cluster: PrivateCluster;
  let ds: DataSource;
  let pool: Pool;
  let h: Harness;
  beforeAll(async () => {
    cluster = await PrivateCluster.create(await freePort());
    await cluster.start();
    pool = new Pool({ connectionString: cluster.url('postgres'), max: 2 });
    pool.on('error', () => undefined);
    const c = await pool.connect();
    try {
      await migrateUp(
        { query: (text, params) => c.query(text, params), inTransaction: false },
        { schema: 'public' },
      );
    } finally {
      c.release();
    }
    ds = new DataSource({ type: 'postgres', url: cluster.url('postgres'), poolSize: 10 });
    await ds.initialize();
    const clusterDb: TestDatabase = {
      name: `private cluster ${cluster.port}`,
      url: cluster.url('postgres'),
      pool,
      dataSource: () => Promise.resolve(ds),
      drop: () => Promise.resolve(),
    };
    // Default lease (60 s): the flush may retry for 30 s.
    h = await bootEngine(
      clusterDb,
      [SoloFsm],
      { queues: { 'link-q': 1 }, pollInterval: 100 },
      { raw: true },
    );
  }, 120_000);
  afterAll(async () => {
    await h?.close();
    if (ds?.isInitialized) await ds.destroy();
    await pool?.end();
    await cluster?.destroy();
  }, 120_000);

  it('the outcome commits after the restart, the step is not re-run', async () => {
    runs.clear(); // ids restart at 1 in this cluster
    const gate = 'outage';
    const id = await h.engine.insert(SoloFsm, { state: { gate } });
    await gates.reached(gate);
    await cluster.stop('fast');
    gates.open(gate); // the outcome is flushed while PostgreSQL is down
    await sleep(5_000);
    await cluster.start();
    await eventually(
      async () => (await rowsOf(pool, [id]))[0]?.['status'] === 'done' || undefined,
      40_000,
      100,
    );
    expect(runs.get(`${id}:start`)).toBe(1);
    expect((await rowsOf(pool, [id]))[0]).toMatchObject({ status: 'done', attempt: 0, reaps: 0 });
    expect(h.eventsOf('flush:error')).toEqual([]);
    expect(h.eventsOf('reaper:reaped')).toEqual([]);
  }, 90_000);
});
