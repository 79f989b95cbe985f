import { DataSource } from 'typeorm';

import {
  awaitSignal,
  done,
  DurableFsm,
  next,
  scheduleChildren,
  Step,
  type StepContext,
  type TransactionalStepContext,
} from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { forkWorker, killAll } from '../support/fork-worker';
import { LEDGER_DDL } from '../support/fixtures/crash.fsm';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { type PgBouncer, startPgBouncer } from './support/pgbouncer';

// The engine through a real PgBouncer 1.18 in transaction pooling mode, with
// `preparedStatements: false` (1.18 has no prepared-statement support of its own; 1.21+ does).
// Every statement of the engine must hold no session state across statements: each may run
// on another server connection than the one before it.

@DurableFsm({ name: 'bounced_counter' })
class Counter {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return ctx.state.n >= 3 ? done({ n: ctx.state.n }) : next('start', { n: ctx.state.n + 1 });
  }
}

@DurableFsm({ name: 'bounced_waiter' })
class Waiter {
  @Step() start(ctx: StepContext<Record<string, never>>) {
    return awaitSignal('go', 'woken', ctx.state);
  }
  @Step() woken(ctx: StepContext<Record<string, never>>) {
    return done({ got: ctx.awaited.map((s) => s.payload) });
  }
}

@DurableFsm({ name: 'bounced_child' })
class Child {
  @Step() start(ctx: StepContext<{ i: number }>) {
    return done({ doubled: ctx.state.i * 2 });
  }
}

@DurableFsm({ name: 'bounced_parent' })
class Parent {
  @Step() start(ctx: StepContext<Record<string, never>>) {
    return scheduleChildren(
      'joined',
      [0, 1, 2, 3].map((i) => ({ fsm: 'bounced_child', state: { i } })),
      ctx.state,
    );
  }
  @Step() joined(ctx: StepContext<Record<string, never>>) {
    return done({
      sum: ctx.children.reduce(
        (a, c) => a + Number((c.result as { doubled?: number } | null)?.doubled ?? 0),
        0,
      ),
    });
  }
}

let running = 0;
let overlap = 0;

@DurableFsm({ name: 'bounced_keyed' })
class Keyed {
  @Step() async start() {
    running += 1;
    overlap = Math.max(overlap, running);
    await new Promise((r) => setTimeout(r, 5));
    running -= 1;
    return done({});
  }
}

@DurableFsm({ name: 'bounced_limited' })
class Limited {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'bounced_trivial' })
class Trivial {
  @Step() start() {
    return done({});
  }
}

/** A transactional step (docs/transactional-steps.md): its row commits with its outcome. */
@DurableFsm({ name: 'bounced_tx' })
class Transactional {
  @Step({ transactional: true })
  async start(ctx: TransactionalStepContext<{ fail: boolean }>) {
    await ctx.manager.query(`INSERT INTO bounced_ledger (instance_id) VALUES ($1)`, [ctx.id]);
    if (ctx.state.fail) throw new Error('rolled back');
    return next('end', ctx.state);
  }
  @Step() end() {
    return done({});
  }
}

/** The same trivial job on its own queue, for the direct drain beside the bounced one. */
@DurableFsm({ name: 'direct_trivial', queue: 'direct' })
class DirectTrivial {
  @Step() start() {
    return done({});
  }
}

/** The test database seen through PgBouncer: same database, DataSource on PgBouncer's port. */
function throughBouncer(
  db: TestDatabase,
  bouncer: PgBouncer,
): TestDatabase & { close(): Promise<void> } {
  let ds: DataSource | undefined;
  return {
    name: db.name,
    url: bouncer.urlFor(db.url),
    pool: db.pool,
    async dataSource() {
      if (!ds) {
        ds = new DataSource({ type: 'postgres', url: bouncer.urlFor(db.url), poolSize: 10 });
        await ds.initialize();
      }
      return ds;
    },
    drop: () => db.drop(),
    async close() {
      if (ds?.isInitialized) await ds.destroy();
    },
  };
}

describe('through PgBouncer (transaction pooling, preparedStatements: false)', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  let bounced: ReturnType<typeof throughBouncer>;
  let t: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    bouncer = await startPgBouncer(db.url);
    bounced = throughBouncer(db, bouncer);
    await db.pool.query(`CREATE TABLE bounced_ledger (instance_id bigint NOT NULL)`);
    const fsms = [Counter, Waiter, Child, Parent, Keyed, Limited, Trivial, Transactional];
    t = await bootEngine(bounced, fsms, {
      preparedStatements: false,
      queues: { default: 20 },
      rateLimits: { slow: { allowed: 50, period: 1, burst: 5 } },
    });
  });

  afterAll(async () => {
    await killAll(); // worker processes a timed-out test left
    await t?.close();
    await bounced?.close();
    await bouncer?.stop();
    await db?.drop();
  });

  it('runs an FSM to completion', async () => {
    const id = await t.engine.insert(Counter, { state: { n: 0 } });
    expect(await t.engine.await(id, { timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { n: 3 },
    });
  });

  it('commits a transactional step with its outcome, exactly once; a throw rolls it back', async () => {
    const ok = await t.engine.insert(Transactional, { state: { fail: false } });
    const bad = await t.engine.insert(Transactional, { state: { fail: true } });
    expect(await t.engine.await(ok, { timeout: 10_000 })).toEqual({ kind: 'done', result: {} });
    expect(await t.engine.await(bad, { timeout: 10_000 })).toMatchObject({ kind: 'failed' });
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT instance_id::text AS id FROM bounced_ledger ORDER BY instance_id`,
    );
    expect(rows).toEqual([{ id: ok }]);
  });

  it('parks on a signal and wakes on delivery (dedup included)', async () => {
    const id = await t.engine.insert(Waiter);
    expect(await t.engine.await(id, { timeout: 10_000 })).toMatchObject({ kind: 'awaiting' });
    await t.engine.signal({ id }, 'go', { v: 1 }, { dedupKey: 'once' });
    await t.engine.signal({ id }, 'go', { v: 2 }, { dedupKey: 'once' });
    expect(await t.engine.await(id, { timeout: 10_000, until: 'terminal' })).toEqual({
      kind: 'done',
      result: { got: [{ v: 1 }] },
    });
  });

  it('fans out children and joins them', async () => {
    const id = await t.engine.insert(Parent);
    expect(await t.engine.await(id, { timeout: 15_000, until: 'terminal' })).toEqual({
      kind: 'done',
      result: { sum: 12 },
    });
  });

  it('keeps a K = 1 concurrency key exclusive and honours a rate limit', async () => {
    overlap = 0;
    const keyed = await t.engine.insertAll(
      Keyed,
      Array.from({ length: 20 }, () => ({ concurrencyKey: 'one' })),
    );
    const limited = await t.engine.insertAll(
      Limited,
      Array.from({ length: 10 }, () => ({ rateLimit: 'slow' })),
    );
    for (const id of [...keyed, ...limited]) {
      expect(await t.engine.await(id, { timeout: 20_000, until: 'terminal' })).toMatchObject({
        kind: 'done',
      });
    }
    expect(overlap).toBe(1);
  });

  /** Inserts `total` jobs of `fsm` through `engine` and waits until all are done; ms taken. */
  async function drain(engine: Harness['engine'], fsm: string, total: number): Promise<number> {
    const started = performance.now();
    for (let i = 0; i < total; i += 5_000) {
      await engine.insertAll(
        fsm,
        Array.from({ length: 5_000 }, () => ({})),
      );
    }
    const deadline = Date.now() + 120_000;
    for (;;) {
      const { rows } = await db.pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM gen_durable WHERE fsm = $1 AND status = 'done'`,
        [fsm],
      );
      if (Number(rows[0]?.n) === total) break;
      if (Date.now() > deadline) throw new Error(`${fsm}: drained ${rows[0]?.n} of ${total}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const elapsed = performance.now() - started;
    const { rows: left } = await db.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM gen_durable WHERE fsm = $1 AND status <> 'done'`,
      [fsm],
    );
    expect(Number(left[0]?.n)).toBe(0);
    return elapsed;
  }

  it('drains 20 000 jobs (the same drain straight to PostgreSQL is printed beside it)', async () => {
    const total = 20_000;
    const bouncedMs = await drain(t.engine, 'bounced_trivial', total);
    // The same drain straight to the server, default settings (prepared statements on).
    const direct = await bootEngine(db, [DirectTrivial], {
      name: 'direct-drain',
      queues: { direct: 20 },
    });
    let directMs: number;
    try {
      directMs = await drain(direct.engine, 'direct_trivial', total);
    } finally {
      await direct.close();
    }
    const rate = (ms: number): number => Math.round((total / ms) * 1000);
    console.log(
      `[pgbouncer] ${total} jobs at concurrency 20: through PgBouncer (transaction pooling, preparedStatements: false) ${rate(bouncedMs)} jobs/s; direct ${rate(directMs)} jobs/s; ratio ${(directMs / bouncedMs).toFixed(2)}`,
    );
  }, 300_000);

  it("holds the node's liveness lock through the pooler; a twin takes it, and the dead claims, once the holder is gone", async () => {
    // docs/design.md §17.3: the lock lives in a transaction left open, which keeps its server
    // connection through transaction pooling; a closed client ends it and frees the lock.
    // Two worker processes with one nodeId, both through PgBouncer.
    await db.pool.query(LEDGER_DDL);
    const url = bouncer.urlFor(db.url);
    const options = {
      nodeId: 'lock-node',
      preparedStatements: false,
      queues: { crash: 1 },
      reaper: false as const,
      gc: false as const,
      pollInterval: 50,
      maxPollInterval: 200,
    };
    const key = 'public:GenDurable:lock-node';
    const tryDirect = async (): Promise<boolean> => {
      const client = await db.pool.connect();
      try {
        const { rows } = await client.query<{ got: boolean }>(
          `SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got`,
          [key],
        );
        if (rows[0]!.got) {
          await client.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [key]);
        }
        return rows[0]!.got;
      } finally {
        client.release();
      }
    };
    const holder = await forkWorker('H', url, options);
    const twin = await forkWorker('T', url, options);
    try {
      expect(await tryDirect()).toBe(false); // held, as a direct session sees it
      expect(twin.messages).toContainEqual({
        type: 'event',
        event: 'boot:warning',
        metadata: {
          warning:
            'another live process holds nodeId lock-node: startup reclaim falls back to the lease',
        },
      });
      // A claim of an earlier process of this node, its lease far from its end.
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, lease_expires_at, claim_seq, state)
         VALUES ('crashy', 'start', 'crash', 'executing', 'GenDurable:crash@lock-node-dead0001',
                 now() + interval '10 minutes', 1, '{"ms": 0}')
         RETURNING id`,
      );
      const dead = rows[0]!.id;
      expect(
        twin.messages.some((m) => m.type === 'event' && m.event === 'scheduler:reclaimed'),
      ).toBe(false);
      holder.child.send({ type: 'shutdown' });
      await holder.exited();
      // The twin takes the lock (it retries every few seconds) and with it the dead claim.
      await twin.waitFor((m) => m.type === 'event' && m.event === 'scheduler:reclaimed', 30_000);
      await eventually(
        async () =>
          (await db.pool.query(`SELECT status FROM gen_durable WHERE id = $1`, [dead])).rows[0]
            ?.status === 'done',
        30_000,
      );
      expect(await tryDirect()).toBe(false); // now the twin's
    } finally {
      twin.child.send({ type: 'shutdown' });
      await twin.exited();
      await killAll();
    }
  }, 180_000);

  describe('pokes', () => {
    it("warns at boot and polls when poke: 'postgres' would LISTEN through the pooler", async () => {
      const h = await bootEngine(bounced, [Counter], {
        name: 'bounced-listen',
        preparedStatements: false,
        poke: 'postgres',
        queues: { default: 2 },
      });
      try {
        const warning = await h.waitFor(
          'boot:warning',
          (e) => String(e.metadata['warning']).includes('transaction pooler'),
          20_000,
        );
        expect(String(warning.metadata['warning'])).toContain('connectionString');
        expect(h.engine.runtime.pokeTransport?.listening).toBe(false);
        // Work still runs: the poll finds it.
        const id = await h.engine.insert(Counter, { state: { n: 2 } });
        expect(await h.engine.await(id, { timeout: 15_000 })).toEqual({
          kind: 'done',
          result: { n: 3 },
        });
      } finally {
        await h.close();
      }
    });

    it('LISTENs on the direct connectionString while statements go through the pooler', async () => {
      const h = await bootEngine(bounced, [Counter], {
        name: 'bounced-direct-listen',
        preparedStatements: false,
        poke: { postgres: { connectionString: db.url } },
        queues: {},
      });
      try {
        const transport = h.engine.runtime.pokeTransport;
        expect(transport?.listening).toBe(true);
        // The delivery probe had PROBE_TIMEOUT_MS to fail; give it that and check no warning came.
        await new Promise((r) => setTimeout(r, 6_000));
        expect(
          h
            .eventsOf('boot:warning')
            .filter((e) => String(e.metadata['warning']).includes('transaction pooler')),
        ).toEqual([]);
        expect(transport?.listening).toBe(true);
      } finally {
        await h.close();
      }
    });
  });
});
