import { eventually } from '../support/engine-harness';
import { forkWorker, killAll } from '../support/fork-worker';
import { LEDGER_DDL } from '../support/fixtures/crash.fsm';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §1.1, §17, §26.1, docs/reliability.md S01/S03/S08: real worker processes (Nest app + engine)
// are killed with SIGKILL mid-step, paused past their lease with SIGSTOP/SIGCONT, and stopped
// with SIGTERM. Rows of a dead worker finish on another process after the lease; none is
// lost; a resumed zombie's late outcome is refused as stale; SIGTERM drains.

jest.setTimeout(120_000);

const LEASE = {
  leaseTtl: 2000,
  heartbeatInterval: 500,
  pollInterval: 50,
  maxPollInterval: 200,
  drainTimeout: 5000,
};

describe('crash recovery with real worker processes', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(LEDGER_DDL);
  });
  afterAll(async () => {
    await killAll();
    await db.drop();
  });

  async function insert(n: number, queue: string, ms: number): Promise<string[]> {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, state)
       SELECT 'crashy', 'start', $1, jsonb_build_object('ms', $2::int) FROM generate_series(1, $3) RETURNING id`,
      [queue, ms, n],
    );
    return rows.map((r) => r.id);
  }

  const rows = async (ids: string[]) =>
    (
      await db.pool.query(
        `SELECT id, status, attempt, reaps, locked_by, result FROM gen_durable WHERE id = ANY($1::bigint[]) ORDER BY id`,
        [ids],
      )
    ).rows as {
      id: string;
      status: string;
      attempt: number;
      reaps: number;
      locked_by: string | null;
      result: Record<string, unknown> | null;
    }[];

  const ledger = async (ids: string[]) =>
    (
      await db.pool.query(
        `SELECT instance_id::text AS id, step, attempt, worker FROM executions WHERE instance_id = ANY($1::bigint[]) ORDER BY started_at`,
        [ids],
      )
    ).rows as { id: string; step: string; attempt: number; worker: string }[];

  it('SIGKILL mid-step: the rows finish on a second process after the lease; none is lost', async () => {
    const ids = await insert(8, 'crash', 1500);
    const a = await forkWorker('A', db.url, {
      ...LEASE,
      nodeId: 'node-a',
      queues: { crash: 4 },
      reaper: false,
      gc: false,
    });
    // Wait until A runs four steps, then kill it mid-step.
    await eventually(
      async () => (await ledger(ids)).filter((e) => e.worker === 'A').length === 4,
      30_000,
    );
    a.child.kill('SIGKILL');
    expect(await a.exited()).toEqual({ code: null, signal: 'SIGKILL' });
    const frozen = (await rows(ids)).filter((r) => r.status === 'executing');
    expect(frozen).toHaveLength(4);
    for (const r of frozen) expect(r.locked_by).toBe(a.workerIds['crash']);
    const killed = frozen.map((r) => r.id);

    // B (another node, with a reaper) finishes everything: the four A never took at once,
    // the four it held after their lease runs out and the reaper returns them.
    const b = await forkWorker('B', db.url, {
      ...LEASE,
      nodeId: 'node-b',
      queues: { crash: 4 },
      reaper: { interval: 250 },
      gc: false,
    });
    try {
      await eventually(
        async () => (await rows(ids)).every((r) => r.status === 'done'),
        60_000,
        100,
      );
      const final = await rows(ids);
      expect(final).toHaveLength(8);
      for (const r of final) {
        expect(r.result).toMatchObject({ by: 'B', startedBy: 'B' });
        expect(r.locked_by).toBeNull();
        expect(r.reaps).toBe(0); // reset by the committed outcome
      }
      expect(b.messages.some((m) => m.type === 'event' && m.event === 'reaper:reaped')).toBe(true);
      // The ledger: A's four started once on A (attempt 0) and again on B (attempt 1).
      const entries = await ledger(ids);
      for (const id of killed) {
        expect(
          entries
            .filter((e) => e.id === id && e.step === 'start')
            .map((e) => [e.worker, e.attempt]),
        ).toEqual([
          ['A', 0],
          ['B', 1],
        ]);
      }
      for (const id of ids.filter((i) => !killed.includes(i))) {
        expect(
          entries.filter((e) => e.id === id && e.step === 'start').map((e) => e.worker),
        ).toEqual(['B']);
      }
    } finally {
      b.child.send({ type: 'shutdown' });
      await b.exited();
    }
  });

  it("SIGSTOP past the lease: another process finishes the row; the zombie's late outcome is stale", async () => {
    const [id] = await insert(1, 'pause', 1500);
    const c = await forkWorker('C', db.url, {
      ...LEASE,
      nodeId: 'node-c',
      queues: { pause: 1 },
      reaper: false,
      gc: false,
    });
    await eventually(async () => (await ledger([id!])).some((e) => e.worker === 'C'), 30_000);
    c.child.kill('SIGSTOP');
    let paused = true;
    // D reaps the row once C's lease runs out, runs both steps and commits.
    const d = await forkWorker('D', db.url, {
      ...LEASE,
      nodeId: 'node-d',
      queues: { pause: 1 },
      reaper: { interval: 250 },
      gc: false,
    });
    try {
      await eventually(async () => (await rows([id!]))[0]?.status === 'done', 60_000, 100);
      const finished = (await rows([id!]))[0]!;
      expect(finished).toMatchObject({ result: { by: 'D', startedBy: 'D' } });
      const { rows: before } = await db.pool.query(
        `SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`,
        [id],
      );

      // C wakes up, its step finishes, and its outcome is refused.
      c.child.kill('SIGCONT');
      paused = false;
      const stale = await c.waitFor(
        (m) => m.type === 'event' && m.event === 'outcome:stale' && m.metadata['id'] === id,
        30_000,
      );
      expect(stale).toMatchObject({ metadata: { fsm: 'crashy', step: 'start', kind: 'next' } });
      const { rows: after } = await db.pool.query(
        `SELECT to_jsonb(g) AS r FROM gen_durable g WHERE id = $1`,
        [id],
      );
      expect(after[0].r).toEqual(before[0].r);
      expect((await ledger([id!])).map((e) => [e.worker, e.step, e.attempt])).toEqual([
        ['C', 'start', 0],
        ['D', 'start', 1],
        ['D', 'finish', 0],
      ]);
    } finally {
      if (paused) c.child.kill('SIGCONT');
      c.child.send({ type: 'shutdown' });
      d.child.send({ type: 'shutdown' });
      await Promise.all([c.exited(), d.exited()]);
    }
  });

  it('SIGTERM mid-step: the process drains — the step commits — and exits', async () => {
    const [id] = await insert(1, 'term', 1500);
    const e = await forkWorker('E', db.url, {
      ...LEASE,
      nodeId: 'node-e',
      queues: { term: 1 },
      reaper: false,
      gc: false,
    });
    await eventually(async () => (await ledger([id!])).some((x) => x.worker === 'E'), 30_000);
    e.child.kill('SIGTERM');
    const exit = await e.exited();
    expect(exit.signal === 'SIGTERM' || exit.code === 0).toBe(true);
    expect(e.messages).toContainEqual({
      type: 'event',
      event: 'scheduler:drain',
      metadata: { queue: 'term' },
    });
    // The in-flight step's outcome committed before the process went away.
    expect((await rows([id!]))[0]).toMatchObject({
      status: 'runnable',
      locked_by: null,
      attempt: 0,
    });
    const { rows: state } = await db.pool.query(
      `SELECT step, state FROM gen_durable WHERE id = $1`,
      [id],
    );
    expect(state[0]).toEqual({ step: 'finish', state: { ms: 1500, startedBy: 'E' } });
  });
});
