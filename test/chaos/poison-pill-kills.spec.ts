import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

import { eventually, rowOf } from '../support/engine-harness';
import { LEDGER_DDL } from '../support/fixtures/crash.fsm';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import type { WorkerConfig, WorkerMessage } from '../support/worker-process';

// docs/design.md §26.5, docs/reliability.md S09 and finding F-R11, with real worker processes: a pill
// (test/support/fixtures/pill.fsm.ts) SIGKILLs the process that runs it, every time. One node
// restarted with the same node id after each death (so its startup reclaim, finding F-R3,
// takes the dead predecessor's rows back) runs the pill's queue and the innocent rows' queue.
// The pill kills exactly reaper.maxReaps workers, becomes a suspect, kills the worker of its solo
// run and is failed; the innocent rows, which died with it, all complete.

jest.setTimeout(300_000);

const MAX_REAPS = 3;
const INNOCENTS = 6;

interface Spawned {
  readonly child: ChildProcess;
  readonly messages: WorkerMessage[];
  readonly ready: Promise<void>;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children: ChildProcess[] = [];

function spawnWorker(name: string, url: string): Spawned {
  const config: WorkerConfig = {
    name,
    url,
    options: {
      nodeId: 'pill-node',
      leaseTtl: 2000,
      heartbeatInterval: 500,
      pollInterval: 50,
      maxPollInterval: 200,
      drainTimeout: 2000,
      prefetch: 0,
      minDemand: 1,
      queues: { pill: 1, crash: 2 },
      reaper: { interval: 100, maxReaps: MAX_REAPS },
      gc: false,
      poke: 'local',
    },
  };
  const child = fork(join(__dirname, '..', 'support', 'worker-process.ts'), [], {
    execArgv: ['-r', join(__dirname, '..', 'support', 'ts-register.cjs')],
    env: { ...process.env, GD_WORKER: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.push(child);
  trackResource(
    `worker process ${name} (pid ${child.pid})`,
    () => child.exitCode === null && child.signalCode === null,
  );
  const messages: WorkerMessage[] = [];
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (m: WorkerMessage) => {
      messages.push(m);
      if (m.type === 'ready') resolve();
    });
    void exit.then(({ code, signal }) => reject(new Error(`${name} exited (${code ?? signal})`)));
  });
  ready.catch(() => undefined);
  return { child, messages, ready, exit };
}

describe('a real poison pill across worker restarts (§26.5, F-R11)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(LEDGER_DDL);
  });
  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((resolve) => child.once('exit', resolve));
      }
    }
    await db.drop();
  });

  it('is failed after reaper.maxReaps kills plus the kill of its solo run; the rows that died with it complete', async () => {
    const { rows: pills } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue) VALUES ('pill', 'start', 'pill') RETURNING id`,
    );
    const pill = pills[0]!.id;
    const { rows: innocents } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, state)
       SELECT 'crashy', 'start', 'crash', '{"ms": 1500}'::jsonb FROM generate_series(1, $1)
       RETURNING id`,
      [INNOCENTS],
    );
    const innocentIds = innocents.map((r) => r.id);

    let kills = 0;
    let last: Spawned | undefined;
    for (let life = 0; life <= MAX_REAPS + 3; life++) {
      // The pill may be claimed (and kill) before the node reports ready: a death is a death.
      const worker = spawnWorker(`life-${life}`, db.url);
      last = worker;
      const failed = eventually(
        async () => (await rowOf(db, pill))['status'] === 'failed',
        120_000,
      ).then(
        () => 'failed' as const,
        () => 'timeout' as const,
      );
      const ended = await Promise.race([worker.exit, failed]);
      if (ended === 'failed') break;
      expect(ended).toEqual({ code: null, signal: 'SIGKILL' });
      kills++;
    }
    expect(await rowOf(db, pill)).toMatchObject({
      status: 'failed',
      reaps: MAX_REAPS + 1,
      suspect: true,
      last_error: `poison pill: step start lost its worker ${MAX_REAPS + 1} times, the last while it ran alone (reaper.maxReaps)`,
    });
    // The cap, then the solo run: one kill each, each an execution of the pill.
    expect(kills).toBe(MAX_REAPS + 1);
    const { rows: runs } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM executions WHERE instance_id = $1`,
      [pill],
    );
    expect(runs[0]?.n).toBe(MAX_REAPS + 1);

    // The surviving node finishes every innocent row; none was failed.
    await eventually(async () => {
      const { rows } = await db.pool.query<{ status: string }>(
        `SELECT status FROM gen_durable WHERE id = ANY ($1::bigint[])`,
        [innocentIds],
      );
      return rows.every((r) => r.status === 'done');
    }, 120_000);
    const poisoned = last!.messages.filter(
      (m) => m.type === 'event' && m.event === 'reaper:poisoned',
    );
    expect(poisoned.map((m) => m.type === 'event' && m.metadata['id'])).toEqual([pill]);
    await last!.ready;
    last!.child.send({ type: 'shutdown' });
    expect(await last!.exit).toEqual({ code: 0, signal: null });
  });
});
