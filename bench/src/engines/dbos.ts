// DBOS Transact through its public API. The case database is DBOS's system database (DBOS
// keeps everything there). Workflows: `bench1` runs one step (DBOS.runStep), `bench3` runs three
// steps in sequence — DBOS's durable unit is a workflow, so a 3-step workflow is the peer of a
// 3-step machine. Work goes through a database-backed queue (DBOS.registerQueue with
// workerConcurrency = C and minPollingIntervalMs = 10, the fast setting; the default is 1 s).
// Inserts before launch use DBOSClient.enqueue (DBOS has no bulk enqueue API: the bulk enqueue
// case is skipped, and drain pre-loads with 50 concurrent single enqueues, not timed); once
// launched, inserts use DBOS.startWorkflow(fn, { queueName }). DBOS is a process-wide
// singleton: each case launches it and shuts it down (deregister) at the end.
import { DBOS, DBOSClient } from '@dbos-inc/dbos-sdk';
import { Pool } from 'pg';
import type { Adapter, CaseContext, Hooks, Instance, Kind } from './types';
import { sleep, version } from './types';

const QUEUE = 'bench';
const APP = 'bench';
const APP_VERSION = 'bench';

function wfName(kind: Kind): string {
  return kind === 'fsm3' ? 'bench3' : 'bench1';
}

class DbosInstance implements Instance {
  private client: DBOSClient | undefined;
  private readonly pool: Pool;
  private launched = false;
  private wf: Partial<Record<Kind, (m?: number) => Promise<void>>> = {};
  private sigFn: ((m: number) => Promise<void>) | undefined;
  private onRecv: () => void = () => undefined;

  constructor(private readonly ctx: CaseContext) {
    this.pool = new Pool({ connectionString: ctx.pgUrl, max: 2 });
    this.pool.on('error', () => undefined);
  }

  async setup(): Promise<void> {
    await DBOS.migrate(this.ctx.pgUrl);
    this.client = await DBOSClient.create({
      systemDatabaseUrl: this.ctx.pgUrl,
      applicationName: APP,
      systemDatabasePoolSize: 10,
    });
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    // No bulk API: 50 concurrent callers of single enqueues.
    let issued = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (issued < n) {
          issued++;
          await this.insertOne(kind);
        }
      }),
    );
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    const fn = this.wf[kind];
    if (this.launched && fn) {
      await DBOS.startWorkflow(fn, { queueName: QUEUE })(marker);
    } else {
      await this.client!.enqueue(
        { queueName: QUEUE, workflowName: wfName(kind), appVersion: APP_VERSION },
        marker,
      );
    }
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    void kind;
    DBOS.setConfig({
      name: APP,
      systemDatabaseUrl: this.ctx.pgUrl,
      systemDatabasePoolSize: 10,
      applicationVersion: APP_VERSION,
      logLevel: 'error',
    });
    const step = (f: () => void) => DBOS.runStep(async () => f(), { name: 'step' });
    this.wf.job = DBOS.registerWorkflow(
      async (m?: number) => {
        await step(() => hooks.onStart?.(m));
        hooks.onFinal?.();
      },
      { name: 'bench1' },
    );
    this.wf.fsm3 = DBOS.registerWorkflow(
      async (m?: number) => {
        await step(() => hooks.onStart?.(m));
        await step(() => undefined);
        await step(() => undefined);
        hooks.onFinal?.();
      },
      { name: 'bench3' },
    );
    this.sigFn = DBOS.registerWorkflow(
      async (m: number) => {
        await DBOS.runStep(async () => this.onRecv(), { name: 'parked' });
        await DBOS.recv('go', 120);
        await step(() => hooks.onStart?.(m));
      },
      { name: 'benchsig' },
    );
    await DBOS.launch();
    this.launched = true;
    await DBOS.registerQueue(QUEUE, {
      workerConcurrency: concurrency,
      minPollingIntervalMs: 10,
      onConflict: 'always_update',
    });
  }

  private sigWorkflows: string[] = [];

  /** Workflows started directly (no queue: every one must be able to wait at once) in DBOS.recv. */
  async parkForSignals(count: number, concurrency: number, hooks: Hooks): Promise<void> {
    let waiting = 0;
    const parkedAll = new Promise<void>((resolve) => {
      this.onRecv = () => {
        if (++waiting >= count) resolve();
      };
    });
    await this.start('job', concurrency, hooks);
    const fn = this.sigFn!;
    this.sigWorkflows = [];
    for (let i = 0; i < count; i++)
      this.sigWorkflows.push((await DBOS.startWorkflow(fn)(i)).workflowID);
    await parkedAll;
    await sleep(200); // recv registers its wait right after the step before it
  }

  async signal(i: number): Promise<void> {
    await DBOS.send(this.sigWorkflows[i]!, {}, 'go');
  }

  async remaining(kind: Kind): Promise<number> {
    const r = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM dbos.workflow_status WHERE name = $1 AND status IN ('ENQUEUED', 'PENDING')`,
      [wfName(kind)],
    );
    return Number(r.rows[0]!.n);
  }

  async close(): Promise<void> {
    if (this.launched)
      await DBOS.shutdown({ deregister: true }).catch((e) =>
        this.ctx.log(`dbos shutdown: ${String(e)}`),
      );
    this.launched = false;
    await this.client?.destroy().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }
}

export const dbosAdapter: Adapter = {
  id: 'dbos',
  family: 'dbos',
  peer: `@dbos-inc/dbos-sdk ${version('@dbos-inc/dbos-sdk')}`,
  settings:
    'queue workerConcurrency = C, minPollingIntervalMs 10, 1-step / 3-step workflows, pool 10',
  backend: 'postgres',
  unsupported: {
    'enqueue-bulk': 'no bulk enqueue API',
    memory: 'no bulk enqueue API: pre-loading 100 000 workflows one by one dominates the run',
  },
  maxN: { job: [2000, 1000], fsm3: [1000, 500] },
  notInQuick: { 'latency-xproc': 'full run only' },
  signals: true,
  create: async (ctx: CaseContext) => new DbosInstance(ctx),
};
