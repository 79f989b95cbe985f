import { eventually } from '../support/engine-harness';
import { forkWorker, killAll } from '../support/fork-worker';
import { LEDGER_DDL } from '../support/fixtures/crash.fsm';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §17.3, docs/operations.md "Crash recovery": a node restarted with the same
// nodeId takes back its dead predecessor's claims at boot, proven by the node's liveness lock
// (an advisory lock PostgreSQL released when the killed process's session ended), without
// waiting for their leases; a second live process with the same nodeId takes nothing.
// Real worker processes, SIGKILL mid-step.

jest.setTimeout(300_000);

/**
 * The default lease and heartbeat (60 s, 20 s): reclaiming by lease age would wait until the
 * dead process missed two heartbeats (40 s); only the liveness proof explains a quick re-run.
 */
const LONG_LEASE = {
  leaseTtl: 60_000,
  heartbeatInterval: 20_000,
  pollInterval: 50,
  maxPollInterval: 200,
  drainTimeout: 5000,
  reaper: false as const,
  gc: false as const,
};

describe('a quick restart takes back its claims at once (real processes)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(LEDGER_DDL);
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
  });

  async function insert(queue: string, ms: number): Promise<string> {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, state) VALUES ('crashy', 'start', $1, jsonb_build_object('ms', $2::int)) RETURNING id`,
      [queue, ms],
    );
    return rows[0]!.id;
  }

  const starts = async (id: string) =>
    (
      await db.pool.query<{ worker: string; attempt: number; at: Date }>(
        `SELECT worker, attempt, started_at AS at FROM executions WHERE instance_id = $1 AND step = 'start' ORDER BY started_at`,
        [id],
      )
    ).rows;

  const row = async (id: string) =>
    (
      await db.pool.query<{
        status: string;
        locked_by: string | null;
        lease_left_ms: number | null;
        reaps: number;
      }>(
        `SELECT status, locked_by, reaps,
                (extract(epoch FROM lease_expires_at - now()) * 1000)::float8 AS lease_left_ms
           FROM gen_durable WHERE id = $1`,
        [id],
      )
    ).rows[0]!;

  it('SIGKILL mid-step, restart after 1 s: the step runs again at boot, long before its lease ends', async () => {
    // A 10-minute step: it runs until the test kills its process, however slow the machine.
    const id = await insert('crash', 600_000);
    const first = await forkWorker('A', db.url, {
      ...LONG_LEASE,
      nodeId: 'node-q',
      queues: { crash: 1 },
    });
    await eventually(async () => (await starts(id)).length === 1, 90_000);
    first.child.kill('SIGKILL');
    await first.exited();
    const held = await row(id);
    expect(held).toMatchObject({ status: 'executing', locked_by: first.workerIds['crash'] });
    // Its lease has most of its 60 s left: a reclaim by lease age (below 60 − 2 × 20 s left)
    // would not take it for another ~20 s.
    expect(held.lease_left_ms).toBeGreaterThan(40_000);
    await new Promise((resolve) => setTimeout(resolve, 1000));

    const bootAt = Date.now();
    const second = await forkWorker('A2', db.url, {
      ...LONG_LEASE,
      nodeId: 'node-q',
      queues: { crash: 1 },
    });
    const readyAt = Date.now();
    try {
      // Reclaimed during boot (the event precedes `ready`), then run by the new process.
      expect(second.messages).toContainEqual({
        type: 'event',
        event: 'scheduler:reclaimed',
        metadata: { queue: 'crash' },
      });
      await eventually(async () => (await starts(id)).length === 2, 90_000, 50);
      const [killed, rerun] = await starts(id);
      expect([killed!.worker, killed!.attempt, rerun!.worker, rerun!.attempt]).toEqual([
        'A',
        0,
        'A2',
        0, // a reclaim is no attempt
      ]);
      expect(await row(id)).toMatchObject({ locked_by: second.workerIds['crash'], reaps: 1 });
      console.log(
        `[quick restart] boot took ${readyAt - bootAt} ms; the step ran again ${rerun!.at.getTime() - readyAt} ms after the restarted process was ready (${rerun!.at.getTime() - bootAt} ms after its launch)`,
      );

      // A second live process with the same nodeId cannot take the lock: it warns and takes
      // nothing of the live process's claim.
      const twin = await forkWorker('A3', db.url, {
        ...LONG_LEASE,
        nodeId: 'node-q',
        queues: { crash: 1 },
      });
      try {
        expect(
          twin.messages.some((m) => m.type === 'event' && m.event === 'scheduler:reclaimed'),
        ).toBe(false);
        expect(
          twin.messages.some(
            (m) =>
              m.type === 'event' &&
              m.event === 'boot:warning' &&
              String(m.metadata['warning']).includes('another live process holds nodeId node-q'),
          ),
        ).toBe(true);
        expect(await row(id)).toMatchObject({
          status: 'executing',
          locked_by: second.workerIds['crash'],
        });
        expect((await starts(id)).map((s) => s.worker)).toEqual(['A', 'A2']);
      } finally {
        twin.child.send({ type: 'shutdown' });
        await twin.exited();
      }
    } finally {
      second.child.kill('SIGKILL');
      await second.exited();
    }
  });
});
