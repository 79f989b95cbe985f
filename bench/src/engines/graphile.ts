// graphile-worker through its public API: run() with a task list, makeWorkerUtils() for inserts.
// Two variants:
//   default  — stock settings (LISTEN/NOTIFY wake-ups, one job fetched per worker round trip);
//   batched  — localQueue (jobs fetched and locked in batches of max(100, 2 × concurrency)) plus
//              completeJobBatchDelay / failJobBatchDelay = 0 (completions batched per tick).
// fsm3 is a chain: step n adds the job for step n+1 (helpers.addJob) before it completes.
import {
  Logger,
  makeWorkerUtils,
  run,
  runMigrations,
  type Runner,
  type Task,
  type WorkerUtils,
} from 'graphile-worker';
import { Pool } from 'pg';
import type { Adapter, CaseContext, Hooks, Instance, Kind } from './types';
import { version } from './types';

const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`);
});

interface Payload {
  s?: number;
  m?: number;
}

class GraphileInstance implements Instance {
  private utils: WorkerUtils | undefined;
  private runner: Runner | undefined;
  private readonly pool: Pool;

  constructor(
    private readonly ctx: CaseContext,
    private readonly batched: boolean,
  ) {
    this.pool = new Pool({ connectionString: ctx.pgUrl, max: 10 });
    // The error handlers graphile-worker asks of a pool it is given.
    this.pool.on('error', () => undefined);
    this.pool.on('connect', (client) => client.on('error', () => undefined));
  }

  async setup(): Promise<void> {
    await runMigrations({ pgPool: this.pool, logger: quietLogger });
    this.utils = await makeWorkerUtils({ pgPool: this.pool, logger: quietLogger });
  }

  private task(kind: Kind): string {
    return kind === 'fsm3' ? 'bench3' : 'bench1';
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    const identifier = this.task(kind);
    const specs = Array.from({ length: n }, () => ({
      identifier,
      payload: kind === 'fsm3' ? { s: 1 } : {},
    }));
    await this.utils!.addJobs(specs);
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    const payload: Payload = kind === 'fsm3' ? { s: 1 } : {};
    if (marker !== undefined) payload.m = marker;
    await this.utils!.addJob(this.task(kind), payload);
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    void kind;
    const bench1: Task = async (payload) => {
      hooks.onStart?.((payload as Payload).m);
      hooks.onFinal?.();
    };
    const bench3: Task = async (payload, helpers) => {
      const p = payload as Payload;
      const s = p.s ?? 1;
      if (s === 1) hooks.onStart?.(p.m);
      if (s < 3) {
        await helpers.addJob('bench3', { s: s + 1 });
      } else {
        hooks.onFinal?.();
      }
    };
    this.runner = await run({
      pgPool: this.pool,
      concurrency,
      noHandleSignals: true,
      logger: quietLogger,
      taskList: { bench1, bench3 },
      preset: this.batched
        ? {
            worker: {
              localQueue: { size: Math.max(100, 2 * concurrency) },
              completeJobBatchDelay: 0,
              failJobBatchDelay: 0,
            },
          }
        : {},
    });
  }

  async remaining(kind: Kind): Promise<number> {
    const r = await this.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE t.identifier = $1',
      [this.task(kind)],
    );
    return Number(r.rows[0]!.n);
  }

  async close(): Promise<void> {
    if (this.runner) await this.runner.stop().catch(() => undefined);
    if (this.utils) await Promise.resolve(this.utils.release()).catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }
}

const v = version('graphile-worker');

export const graphileDefault: Adapter = {
  id: 'graphile-worker',
  family: 'graphile-worker',
  peer: `graphile-worker ${v}`,
  settings: 'defaults (LISTEN/NOTIFY, one job per fetch), pool 10',
  backend: 'postgres',
  unsupported: {
    memory:
      'one job per fetch, about 1 000 jobs/s here: a 100 000 backlog takes minutes (see drain for its rate)',
  },
  maxN: { job: [5000, 3000], fsm3: [1000, 300] },
  create: async (ctx: CaseContext) => new GraphileInstance(ctx, false),
};

export const graphileBatched: Adapter = {
  id: 'graphile-worker:batched',
  family: 'graphile-worker',
  peer: `graphile-worker ${v}`,
  settings:
    'localQueue.size = max(100, 2×concurrency), completeJobBatchDelay = failJobBatchDelay = 0, pool 10',
  backend: 'postgres',
  unsupported: {},
  maxN: { fsm3: [2000, 500] },
  notInQuick: { 'latency-xproc': 'full run only' },
  create: async (ctx: CaseContext) => new GraphileInstance(ctx, true),
};
