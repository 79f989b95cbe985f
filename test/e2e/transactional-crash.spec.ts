import { eventually } from '../support/engine-harness';
import { forkWorker, killAll } from '../support/fork-worker';
import { TX_LEDGER_DDL } from '../support/fixtures/tx-ledger.fsm';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/transactional-steps.md: a real worker process is killed with SIGKILL while its
// transactional steps are mid-step, their ledger rows written through ctx.manager but not
// committed. The server rolls those transactions back; a second process re-runs the steps
// after the lease and commits exactly one ledger row per instance.

jest.setTimeout(120_000);

const LEASE = {
  leaseTtl: 2000,
  heartbeatInterval: 500,
  pollInterval: 50,
  maxPollInterval: 200,
  drainTimeout: 5000,
};

describe('transactional steps across a SIGKILL', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(TX_LEDGER_DDL);
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
  });

  const ledger = async (ids: string[]) =>
    (
      await db.pool.query<{ id: string; attempt: number; worker: string }>(
        `SELECT instance_id::text AS id, attempt, worker FROM tx_ledger
          WHERE instance_id = ANY($1::bigint[]) ORDER BY instance_id`,
        [ids],
      )
    ).rows;

  /** Sessions inside a transactional step that wrote its ledger row (uncommitted). */
  const midStep = async (): Promise<number> =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction'
            AND query LIKE 'INSERT INTO tx_ledger%'`,
      )
    ).rows[0]!.n;

  it('SIGKILL mid-step leaves no ledger row; the re-run on another process writes exactly one', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, state)
       SELECT 'tx-ledger', 'start', 'tx-ledger', jsonb_build_object('ms', 60000)
         FROM generate_series(1, 4) RETURNING id`,
    );
    const ids = rows.map((r) => r.id);
    const a = await forkWorker('A', db.url, {
      ...LEASE,
      nodeId: 'tx-node-a',
      queues: { 'tx-ledger': 4 },
      reaper: false,
      gc: false,
    });
    // All four steps wrote their row and sit in their transactions (60 s steps).
    await eventually(async () => (await midStep()) === 4, 30_000);
    expect(await ledger(ids)).toEqual([]);
    a.child.kill('SIGKILL');
    expect(await a.exited()).toEqual({ code: null, signal: 'SIGKILL' });
    // The server rolls the dead sessions back: nothing of the steps persists.
    await eventually(async () => (await midStep()) === 0, 30_000);
    expect(await ledger(ids)).toEqual([]);

    // B re-runs them (short steps now) after the lease.
    await db.pool.query(
      `UPDATE gen_durable SET state = jsonb_build_object('ms', 10) WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    const b = await forkWorker('B', db.url, {
      ...LEASE,
      nodeId: 'tx-node-b',
      queues: { 'tx-ledger': 4 },
      reaper: { interval: 250 },
      gc: false,
    });
    try {
      await eventually(
        async () => {
          const { rows: done } = await db.pool.query(
            `SELECT id FROM gen_durable WHERE id = ANY($1::bigint[]) AND status = 'done'`,
            [ids],
          );
          return done.length === 4;
        },
        60_000,
        100,
      );
      const entries = await ledger(ids);
      expect(entries.map((e) => e.id)).toEqual([...ids].sort((x, y) => Number(x) - Number(y)));
      for (const e of entries) expect(e).toMatchObject({ worker: 'B', attempt: 1 });
    } finally {
      b.child.send({ type: 'shutdown' });
      await b.exited();
    }
  });
});
