import { createServer } from 'node:net';

import { Test, type TestingModule } from '@nestjs/testing';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';

import { done, DurableFsm, EngineService, GenDurableModule, NoTargetError, Step } from '../../lib';
import { migrateUp } from '../../lib/schema/migrator';
import { PrivateCluster } from '../chaos/harness/pg-cluster';
import { eventually, FAST } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';

// docs/operations.md "Read replicas": a private primary and a streaming hot standby (PostgreSQL
// 15 from Debian, own ports and data folders, stopped at the end); the engine gets `dataSource`
// on the primary and `readDataSource` on the standby. The route is proven, not inferred from
// results: the statement hook of each executor names what ran on it, each executor's pool
// answers `pg_is_in_recovery()`, and with WAL replay paused on the standby (`pg_wal_replay_pause`)
// a row committed on the primary is missing from `list`, `count`, `queueStatus` and `history`
// while `get` and `await` see it — the staleness the docs promise, nothing more.

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

@DurableFsm({ name: 'replica-run', queue: 'replica-run' })
class RunFsm {
  @Step() start() {
    return done({ ran: true });
  }
}

/** Its queue is run by no node: its rows stay runnable, so what each server shows is stable. */
@DurableFsm({ name: 'replica-parked', queue: 'replica-parked' })
class ParkedFsm {
  @Step() start() {
    return done({});
  }
}

/** Statements the engine may send to the replica; anything else there is a routing bug. */
const REPLICA_READS = new Set([
  'list_instances',
  'count_instances',
  'read_history',
  'read_history_by_key',
  'begin',
  'set_local_no_jit',
  'queue_status',
  'commit',
  'rollback',
  'health_runnable_backlog',
]);

describe('read replica (docs/operations.md "Read replicas")', () => {
  let primary: PrivateCluster | undefined;
  let standby: PrivateCluster | undefined;
  let writes: DataSource | undefined;
  let reads: DataSource | undefined;
  let standbyAdmin: Pool | undefined;
  let app: TestingModule | undefined;
  let engine: EngineService;
  const onPrimary: string[] = [];
  const onReplica: string[] = [];

  beforeAll(async () => {
    primary = await PrivateCluster.create(await freePort());
    await primary.start();
    const admin = new Pool({ connectionString: primary.url('postgres'), max: 1 });
    await admin.query('CREATE DATABASE gd');
    await admin.end();
    const migrate = new Pool({ connectionString: primary.url('gd'), max: 1 });
    const c = await migrate.connect();
    try {
      await migrateUp({ query: (text, params) => c.query(text, params), inTransaction: false });
    } finally {
      c.release();
      await migrate.end();
    }
    standby = await PrivateCluster.standbyOf(primary, await freePort(), 'replica1');
    await standby.start();
    standbyAdmin = new Pool({ connectionString: standby.url('gd'), max: 1 });
    await eventually(async () => {
      const { rows } = await standbyAdmin!.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name = 'gen_durable'`,
      );
      return rows[0]?.n === 1;
    }, 30_000);

    writes = await new DataSource({
      type: 'postgres',
      url: primary.url('gd'),
      poolSize: 4,
    }).initialize();
    reads = await new DataSource({
      type: 'postgres',
      url: standby.url('gd'),
      poolSize: 2,
    }).initialize();
    app = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: writes,
          readDataSource: reads,
          ...FAST,
          queues: { 'replica-run': 2 },
          fsms: [RunFsm, ParkedFsm],
        }),
      ],
      providers: [RunFsm, ParkedFsm],
    }).compile();
    let open = true;
    trackResource('read-replica app', () => open);
    afterAllClose = async () => {
      await app?.close();
      open = false;
    };
    engine = app.get(EngineService);
    await app.init();
    engine.runtime.sql.onStatement((e) => onPrimary.push(e.name));
    engine.runtime.reads.onStatement((e) => onReplica.push(e.name));
  }, 180_000);

  let afterAllClose: () => Promise<void> = async () => undefined;
  afterAll(async () => {
    await afterAllClose();
    await writes?.destroy();
    await reads?.destroy();
    await standbyAdmin?.end();
    await standby?.destroy();
    await primary?.destroy();
  }, 120_000);

  it('runs list, count, history and queueStatus on the replica, claims, inserts, flushes and get on the primary', async () => {
    const recovery = async (pool: Pool) =>
      (await pool.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]!.r;
    expect(await recovery(engine.runtime.reads.pool)).toBe(true);
    expect(await recovery(engine.runtime.sql.pool)).toBe(false);

    const ids = await Promise.all([1, 2, 3].map(() => engine.insert(RunFsm)));
    for (const id of ids) {
      expect((await engine.await({ id }, { timeout: 10_000 })).kind).toBe('done');
    }
    await eventually(
      async () => (await engine.count({ fsm: 'replica-run', status: 'done' })).count === 3,
      30_000,
    );
    const listed = await engine.list({ fsm: 'replica-run' });
    expect(listed.items.map((i) => i.id).sort()).toEqual([...ids].sort());
    expect((await engine.history({ id: ids[0]! })).length).toBeGreaterThanOrEqual(0);
    await engine.queueStatus('replica-run');

    const replicaNames = new Set(onReplica);
    expect([...replicaNames].filter((n) => !REPLICA_READS.has(n))).toEqual([]);
    expect(replicaNames).toEqual(
      new Set(
        [...REPLICA_READS].filter(
          (n) => n !== 'rollback' && n !== 'read_history_by_key' && n !== 'health_runnable_backlog',
        ),
      ),
    );
    const primaryNames = new Set(onPrimary);
    for (const name of ['claim_runnable', 'get_instance_by_id']) {
      expect(primaryNames).toContain(name);
    }
    // A lone insert is INSERT_INSTANCE, or INSERT_CLAIMED with a slot free (docs/design.md §5.5.1).
    expect([...primaryNames].some((n) => n === 'insert_instance' || n === 'insert_claimed')).toBe(
      true,
    );
    expect([...primaryNames].some((n) => n.startsWith('flush'))).toBe(true);
    for (const name of ['list_instances', 'count_instances', 'read_history', 'queue_status']) {
      expect(primaryNames).not.toContain(name);
    }
  }, 60_000);

  it('a lagging replica: list, count, queueStatus and history miss a fresh row that get and await see', async () => {
    const before = (await engine.count({ fsm: 'replica-parked' })).count;
    const parkedBefore = (await engine.queueStatus('replica-parked'))[0]?.runnable.count ?? 0;
    await standbyAdmin!.query('SELECT pg_wal_replay_pause()');
    try {
      await eventually(async () => {
        const { rows } = await standbyAdmin!.query<{ s: string }>(
          'SELECT pg_get_wal_replay_pause_state() AS s',
        );
        return rows[0]?.s === 'paused';
      }, 10_000);
      const fresh = await engine.insert(ParkedFsm);
      const ran = await engine.insert(RunFsm);

      // The primary answers get and await at once.
      expect((await engine.get({ id: fresh }))?.status).toBe('runnable');
      expect(await engine.await({ id: ran }, { timeout: 10_000 })).toMatchObject({ kind: 'done' });
      // The replica has not replayed the commits: the reads routed there do not see them.
      expect((await engine.list({ fsm: 'replica-parked' })).items.map((i) => i.id)).not.toContain(
        fresh,
      );
      expect((await engine.count({ fsm: 'replica-parked' })).count).toBe(before);
      expect((await engine.queueStatus('replica-parked'))[0]?.runnable.count ?? 0).toBe(
        parkedBefore,
      );
      await expect(engine.history({ id: fresh })).rejects.toBeInstanceOf(NoTargetError);
      expect((await engine.list({ fsm: 'replica-run' })).items.map((i) => i.id)).not.toContain(ran);
    } finally {
      await standbyAdmin!.query('SELECT pg_wal_replay_resume()');
    }
    // Replay resumed: the replica catches up and the same reads see both rows.
    await eventually(
      async () => (await engine.count({ fsm: 'replica-parked' })).count === before + 1,
      30_000,
    );
    await eventually(
      async () => (await engine.count({ fsm: 'replica-run', status: 'done' })).count === 4,
      30_000,
    );
  }, 60_000);
});
