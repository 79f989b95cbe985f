import Redis from 'ioredis';
import { Client } from 'pg';

import { DurableFsm, done, Step } from '../../lib';
import { defaultRedisPrefix } from '../../lib/db/engine-namespace';
import { SqlExecutor } from '../../lib/db/sql-executor';
import type { PokeListener, PokeTransport } from '../../lib/poke/poke-transport.interface';
import {
  listenerConnectionOf,
  PostgresPokeTransport,
} from '../../lib/poke/postgres.poke-transport';
import { RedisPokeTransport } from '../../lib/poke/redis.poke-transport';
import type { Scheduler } from '../../lib/runtime/scheduler';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, redisUrl, type TestDatabase } from '../support/test-database';

@DurableFsm({ name: 'poked_job' })
class PokedJob {
  @Step() start() {
    return done({ ok: true });
  }
}

let releaseLong: () => void = () => undefined;
let longStarted: () => void = () => undefined;

/** A step that runs until the test releases it. */
@DurableFsm({ name: 'long_job' })
class LongJob {
  @Step() async start() {
    longStarted();
    await new Promise<void>((resolve) => (releaseLong = resolve));
    return done({ ok: true });
  }
}

/** A poll this long never fires during a test: whatever runs was found by a poke. */
const NO_POLL = { pollInterval: 60_000, maxPollInterval: 60_000 };

function schedulerOf(h: Harness, queue = 'default'): Scheduler {
  const scheduler = h.engine.runtime.schedulers.get(queue);
  if (!scheduler) throw new Error(`no scheduler for ${queue}`);
  return scheduler;
}

/** Waits for the first poll tick to finish, so the scheduler is idle and its poll far away. */
async function idleAfterBoot(h: Harness): Promise<void> {
  await h.waitFor('scheduler:saturation');
}

/** A listener that records what reaches it. */
function recorder(): PokeListener & { queues: string[]; resyncs: number; degradations: string[] } {
  const r = {
    queues: [] as string[],
    resyncs: 0,
    degradations: [] as string[],
    poke(queue: string) {
      r.queues.push(queue);
    },
    resync() {
      r.resyncs += 1;
    },
    degraded(message: string) {
      r.degradations.push(message);
    },
  };
  return r;
}

function tracked<T extends PokeTransport>(label: string, transport: T): T {
  let open = true;
  const close = transport.close.bind(transport);
  transport.close = async () => {
    await close();
    open = false;
  };
  trackResource(label, () => open);
  return transport;
}

// docs/design.md §16.4, §25.10: every poke mode — 'local', 'postgres', { redis }, 'none'.
/**
 * One PokedJob through `insertAll`, whose rows are found by a claim after a poke: a lone
 * `insert` with a slot free here would be written claimed and start without either
 * (docs/design.md §5.5.1 "Inserted claimed").
 */
async function insertPoked(h: Harness): Promise<string> {
  const [id] = await h.engine.insertAll(PokedJob, [{}]);
  return id!;
}

describe('poke modes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  describe("'local'", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [PokedJob, LongJob], {
        name: 'PokeLocal',
        poke: 'local',
        ...NO_POLL,
      });
      await idleAfterBoot(h);
    });
    afterAll(async () => {
      await h.close();
    });

    it('an insert wakes the idle local scheduler at once (its poll is a minute away)', async () => {
      expect(h.engine.runtime.pokeTransport).toBeUndefined();
      const pokes = jest.spyOn(schedulerOf(h), 'poke');
      try {
        const id = await insertPoked(h);
        expect(await h.engine.await(id, { timeout: 20_000 })).toEqual({
          kind: 'done',
          result: { ok: true },
        });
        expect(pokes).toHaveBeenCalledTimes(1);
      } finally {
        pokes.mockRestore();
      }
    });

    it('a scheduler running a long step with slots free claims a poked row at once (docs/design.md §5.5: "busy" = no free slot)', async () => {
      const started = new Promise<void>((resolve) => (longStarted = resolve));
      const long = await h.engine.insert(LongJob);
      await started;
      try {
        expect(schedulerOf(h).inFlightCount).toBe(1);
        const id = await insertPoked(h);
        // The poll is a minute away and the long step holds its slot: only the poke can run it.
        expect(await h.engine.await(id, { timeout: 5_000 })).toEqual({
          kind: 'done',
          result: { ok: true },
        });
      } finally {
        releaseLong();
      }
      expect(await h.engine.await(long, { timeout: 20_000 })).toEqual({
        kind: 'done',
        result: { ok: true },
      });
    });

    it('a poke that lands while an empty pick is in flight is not lost', async () => {
      const picker = h.engine.runtime.picker;
      const original = picker.pickBatch.bind(picker);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let held!: () => void;
      const reached = new Promise<void>((resolve) => (held = resolve));
      const spy = jest.spyOn(picker, 'pickBatch').mockImplementationOnce(async (...args) => {
        const batch = await original(...args);
        held();
        await gate;
        return batch;
      });
      try {
        schedulerOf(h).poke(); // an idle poke: its pick finds nothing and is held after the claim
        await reached;
        await new Promise((r) => setTimeout(r, 30)); // past the 10 ms poke window
        const id = await insertPoked(h); // its poke arrives during the held, empty pick
        release();
        expect(await h.engine.await(id, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
      } finally {
        release();
        spy.mockRestore();
      }
    });
    it('a poke inside the 10 ms window picks at once when the last pick found the queue drained', async () => {
      // The window's timer is captured and never fires: whatever runs B was picked at once.
      const realSetTimeout = global.setTimeout;
      let windowTimers = 0;
      const spy = jest.spyOn(global, 'setTimeout').mockImplementation(((
        fn: (...a: unknown[]) => void,
        ms?: number,
        ...rest: unknown[]
      ) => {
        if (ms === 10) {
          windowTimers += 1;
          return realSetTimeout(() => undefined, 0);
        }
        return realSetTimeout(fn, ms, ...rest);
      }) as unknown as typeof setTimeout);
      try {
        const a = await insertPoked(h); // leading edge: opens the window, picks A
        expect(await h.engine.await(a, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
        expect(windowTimers).toBeGreaterThan(0);
        // The window never closes (its timer was swallowed); the last pick claimed fewer rows
        // than it wanted, so B's poke must not wait for a trailing fill.
        const b = await insertPoked(h);
        expect(await h.engine.await(b, { timeout: 10_000 })).toMatchObject({ kind: 'done' });
      } finally {
        spy.mockRestore();
      }
    });
  });

  describe("'none'", () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [PokedJob], {
        name: 'PokeNone',
        poke: 'none',
        pollInterval: 200,
        maxPollInterval: 400,
      });
    });
    afterAll(async () => {
      await h.close();
    });

    it('pokes nothing, not even locally; the poll still finds the work', async () => {
      expect(h.engine.runtime.pokeTransport).toBeUndefined();
      const pokes = jest.spyOn(schedulerOf(h), 'poke');
      try {
        const id = await h.engine.insert(PokedJob);
        expect(await h.engine.await(id, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
        expect(pokes).not.toHaveBeenCalled();
      } finally {
        pokes.mockRestore();
      }
    });
  });

  describe("'postgres'", () => {
    let sql: SqlExecutor;
    const channel = 'gen_durable:PgT:poke';
    beforeAll(() => {
      sql = new SqlExecutor(db.pool, {
        schema: 'public',
        preparedStatements: true,
        statementTimeoutMs: 5_000,
      });
    });

    function transport(
      name: string,
      connection = listenerConnectionOf(db.pool, `poke-test-${name}`),
    ): PostgresPokeTransport {
      return tracked(
        `pg poke transport ${name}`,
        new PostgresPokeTransport(sql, {
          channel,
          sender: `${name}-0001`,
          connection,
          pingIntervalMs: 200,
          statementTimeoutMs: 2_000,
        }),
      );
    }

    it('delivers to the other nodes, ignores its own, as an autocommit NOTIFY of its own', async () => {
      const a = transport('a');
      const b = transport('b');
      const heardA = recorder();
      const heardB = recorder();
      const seen: Array<{ name: string; inTransaction: boolean }> = [];
      const off = sql.onStatement((e) => seen.push(e));
      try {
        await a.start(heardA);
        await b.start(heardB);
        expect(a.listening && b.listening).toBe(true);
        a.publish('q1');
        await eventually(async () => heardB.queues.length === 1);
        b.publish('q2');
        await eventually(async () => heardA.queues.length === 1);
        // NOTIFYs reach every listener in commit order: A saw its own q1 before q2, and ignored it.
        expect(heardA.queues).toEqual(['q2']);
        expect(heardB.queues).toEqual(['q1']);
        // Each listener probed its own delivery once after LISTEN (notify_probe), and heard it:
        // neither was degraded, and the probes poked nothing.
        expect(seen.filter((e) => e.name === 'notify_poke')).toEqual([
          { name: 'notify_poke', inTransaction: false },
          { name: 'notify_poke', inTransaction: false },
        ]);
        expect(seen.filter((e) => e.name === 'notify_probe')).toHaveLength(2);
        expect(seen.map((e) => e.name).sort()).toEqual([
          'notify_poke',
          'notify_poke',
          'notify_probe',
          'notify_probe',
        ]);
        expect([...heardA.degradations, ...heardB.degradations]).toEqual([]);
      } finally {
        off();
        await a.close();
        await b.close();
      }
    });

    it('the listener reconnects after its backend is killed, resyncs, and hears again', async () => {
      const a = transport('a2');
      const b = transport('b2');
      const heardB = recorder();
      try {
        await a.start(recorder());
        await b.start(heardB);
        const killed = await db.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'poke-test-b2'`,
        );
        expect(killed.rowCount).toBe(1);
        await eventually(async () => heardB.resyncs === 1 && b.listening, 15_000);
        a.publish('after-reconnect');
        await eventually(async () => heardB.queues.includes('after-reconnect'));
      } finally {
        await a.close();
        await b.close();
      }
    });

    it('a listener that cannot connect degrades to nothing: start resolves, nothing throws', async () => {
      const dead = transport('dead', {
        host: '127.0.0.1',
        port: 1,
        user: 'nobody',
        database: 'none',
      });
      try {
        await dead.start(recorder());
        expect(dead.listening).toBe(false);
        expect(() => dead.publish('q')).not.toThrow();
      } finally {
        await dead.close();
      }
    });

    describe('in an engine', () => {
      let h: Harness;
      let witness: Client;
      beforeAll(async () => {
        h = await bootEngine(db, [PokedJob], { name: 'PokePg', poke: 'postgres', ...NO_POLL });
        await idleAfterBoot(h);
        witness = new Client({ connectionString: db.url });
        await witness.connect();
        await witness.query('LISTEN "gen_durable:public:PokePg:poke"');
      });
      afterAll(async () => {
        await witness.end();
        await h.close();
      });

      it('announces after the insert committed and ignores its own announcement', async () => {
        expect(h.engine.runtime.pokeTransport?.listening).toBe(true);
        const heard: string[] = [];
        witness.on('notification', (m) => heard.push(m.payload ?? ''));
        const pokes = jest.spyOn(schedulerOf(h), 'poke');
        try {
          h.clear();
          const id = await insertPoked(h);
          await eventually(async () => heard.length === 1);
          expect(heard[0]).toMatch(/\|default$/);
          expect(h.statements.indexOf('notify_poke')).toBeGreaterThan(
            h.statements.indexOf('insert_instance'),
          );
          // Another node's announcement for this queue arrives after our own (commit order):
          // once it is counted, our own copy was already heard — and ignored.
          await db.pool.query(
            `SELECT pg_notify('gen_durable:public:PokePg:poke', 'other-node-0000|default')`,
          );
          await eventually(async () => pokes.mock.calls.length >= 2);
          expect(pokes).toHaveBeenCalledTimes(2);
          expect(await h.engine.await(id, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
        } finally {
          pokes.mockRestore();
        }
      });
    });
  });

  const url = redisUrl();
  // Redis-backed tests need REDIS_URL (CI always has it; global-setup fails there without it).
  if (url) {
    describe('{ redis }', () => {
      let admin: Redis;
      const channel = 'gen_durable:RedisT:poke';
      beforeAll(() => {
        admin = new Redis(url);
      });
      afterAll(async () => {
        await admin.quit();
      });

      function transport(name: string, redis: string = url as string): RedisPokeTransport {
        return tracked(
          `redis poke transport ${name}`,
          new RedisPokeTransport({
            channel,
            sender: `${name}-0001`,
            redis,
            clientName: `poke-test-${name}-${process.pid}`,
            commandTimeoutMs: 2_000,
          }),
        );
      }

      it('delivers to the other nodes and ignores its own', async () => {
        const a = transport('a');
        const b = transport('b');
        const heardA = recorder();
        const heardB = recorder();
        try {
          await a.start(heardA);
          await b.start(heardB);
          await eventually(async () => a.listening && b.listening);
          a.publish('q1');
          await eventually(async () => heardB.queues.length === 1);
          b.publish('q2');
          await eventually(async () => heardA.queues.length === 1);
          expect(heardA.queues).toEqual(['q2']);
          expect(heardB.queues).toEqual(['q1']);
        } finally {
          await a.close();
          await b.close();
        }
      });

      it('the subscriber reconnects after its connection is killed, resyncs, and hears again', async () => {
        const a = transport('a2');
        const b = transport('b2');
        const heardB = recorder();
        try {
          await a.start(recorder());
          await b.start(heardB);
          await eventually(async () => a.listening && b.listening);
          const clients = String(await admin.call('CLIENT', 'LIST'));
          const line = clients
            .split('\n')
            .find((l) => l.includes(`name=poke-test-b2-${process.pid}-sub`));
          const clientId = /\bid=(\d+)/.exec(line ?? '')?.[1];
          expect(clientId).toBeDefined();
          await admin.call('CLIENT', 'KILL', 'ID', clientId as string);
          await eventually(async () => heardB.resyncs === 1 && b.listening, 15_000);
          a.publish('after-reconnect');
          await eventually(async () => heardB.queues.includes('after-reconnect'));
        } finally {
          await a.close();
          await b.close();
        }
      });

      it('an unreachable Redis degrades to nothing: start resolves, nothing throws', async () => {
        const dead = transport('dead', 'redis://127.0.0.1:1');
        try {
          await dead.start(recorder());
          expect(dead.listening).toBe(false);
          expect(() => dead.publish('q')).not.toThrow();
        } finally {
          await dead.close();
        }
      });

      describe('in an engine', () => {
        let h: Harness;
        let witness: Redis;
        beforeAll(async () => {
          h = await bootEngine(db, [PokedJob], {
            name: 'PokeRedis',
            poke: { redis: url },
            ...NO_POLL,
          });
          await idleAfterBoot(h);
          witness = new Redis(url);
          await witness.subscribe(`${defaultRedisPrefix(db.name, 'public', 'PokeRedis')}poke`);
        });
        afterAll(async () => {
          witness.disconnect();
          await h.close();
        });

        it('announces an insert on the channel and runs it locally at once', async () => {
          await eventually(async () => h.engine.runtime.pokeTransport?.listening === true);
          const heard: string[] = [];
          witness.on('message', (_channel: string, message: string) => heard.push(message));
          const id = await insertPoked(h);
          expect(await h.engine.await(id, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
          await eventually(async () => heard.length >= 1);
          expect(heard[0]).toMatch(/\|default$/);
        });
      });

      it('an engine whose Redis is down boots, and its work still runs', async () => {
        const h = await bootEngine(db, [PokedJob], {
          name: 'PokeRedisDown',
          poke: { redis: 'redis://127.0.0.1:1' },
          pollInterval: 200,
          maxPollInterval: 400,
        });
        try {
          expect(h.engine.runtime.pokeTransport?.listening).toBe(false);
          const id = await h.engine.insert(PokedJob);
          expect(await h.engine.await(id, { timeout: 20_000 })).toMatchObject({ kind: 'done' });
        } finally {
          await h.close();
        }
      });
    });
  }
});
