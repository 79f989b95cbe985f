// pg-boss 10 through its public API. pg-boss 10 has no per-worker concurrency option and no
// LISTEN/NOTIFY: each work() registration is one polling loop fetching up to `batchSize` jobs
// and completing the batch with one statement. Variants batchSize 1 and 50; at concurrency C
// there are ceil(C / b) registrations fetching min(b, C) jobs each, so at most C jobs run at
// once as with every other engine.
// After every fetch a pg-boss 10 worker waits out pollingIntervalSeconds (minimum 0.5 s) unless
// it is notified, so the handler calls boss.notifyWorker(ownId) after a non-empty batch (a busy
// worker fetches again at once), and insertOne() notifies the local workers after send() (same
// process) — both public API. pollingIntervalSeconds = 0.5 (the minimum); maintenance
// (supervise), cron (schedule) and state monitoring are off for the bench.
// fsm3 is a chain: the handler inserts the next step's jobs (one insert() per batch) before the
// batch completes.
import PgBoss from 'pg-boss';
import type { Adapter, CaseContext, Hooks, Instance, Kind } from './types';
import { version } from './types';

interface Payload {
  s?: number;
  m?: number;
}

class PgBossInstance implements Instance {
  private readonly boss: PgBoss;
  private workerIds: string[] = [];

  constructor(
    ctx: CaseContext,
    private readonly batchSize: number,
  ) {
    this.boss = new PgBoss({
      connectionString: ctx.pgUrl,
      max: 10,
      supervise: false,
      schedule: false,
    });
    this.boss.on('error', (e: Error) => ctx.log(`pg-boss: ${e.message}`));
  }

  private queue(kind: Kind): string {
    return kind === 'fsm3' ? 'bench3' : 'bench1';
  }

  async setup(): Promise<void> {
    await this.boss.start();
    await this.boss.createQueue('bench1');
    await this.boss.createQueue('bench3');
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    const name = this.queue(kind);
    const data = kind === 'fsm3' ? { s: 1 } : {};
    await this.boss.insert(Array.from({ length: n }, () => ({ name, data })));
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    const data: Payload = kind === 'fsm3' ? { s: 1 } : {};
    if (marker !== undefined) data.m = marker;
    await this.boss.send(this.queue(kind), data);
    for (const id of this.workerIds) this.boss.notifyWorker(id);
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    const name = this.queue(kind);
    const ids: string[] = [];
    const batchSize = Math.min(this.batchSize, concurrency);
    const workers = Math.ceil(concurrency / batchSize);
    for (let i = 0; i < workers; i++) {
      const slot: { id?: string } = {};
      const id = await this.boss.work<Payload>(
        name,
        { batchSize, pollingIntervalSeconds: 0.5 },
        async (jobs) => {
          const next: PgBoss.JobInsert[] = [];
          await Promise.all(
            jobs.map(async (job) => {
              const s = job.data.s ?? 1;
              if (s === 1) hooks.onStart?.(job.data.m);
              if (kind === 'fsm3' && s < 3) {
                next.push({ name, data: { s: s + 1 } });
              } else {
                hooks.onFinal?.();
              }
            }),
          );
          if (next.length > 0) await this.boss.insert(next);
          if (jobs.length > 0 && slot.id) this.boss.notifyWorker(slot.id);
        },
      );
      slot.id = id;
      ids.push(id);
    }
    this.workerIds = ids;
  }

  async remaining(kind: Kind): Promise<number> {
    return this.boss.getQueueSize(this.queue(kind), { before: 'completed' });
  }

  async close(): Promise<void> {
    await this.boss.stop({ graceful: false, wait: true, timeout: 2000 }).catch(() => undefined);
  }
}

const v = version('pg-boss');
const XPROC =
  'no cross-process wake-up in pg-boss 10: a worker in another process waits for its poll (≥ 0.5 s)';

export const pgBoss1: Adapter = {
  id: 'pg-boss:b1',
  family: 'pg-boss',
  peer: `pg-boss ${v}`,
  settings:
    'batchSize 1, C work() registrations, pollingIntervalSeconds 0.5 + notifyWorker, pool 10',
  backend: 'postgres',
  unsupported: {
    memory: 'one job per fetch: a 100 000 backlog takes minutes (see drain for its rate)',
    'latency-xproc': XPROC,
  },
  maxN: { job: [2000, 1000], fsm3: [500, 300] },
  create: async (ctx: CaseContext) => new PgBossInstance(ctx, 1),
};

export const pgBoss50: Adapter = {
  id: 'pg-boss:b50',
  family: 'pg-boss',
  peer: `pg-boss ${v}`,
  settings:
    'batchSize min(50, C), ceil(C/50) work() registrations, pollingIntervalSeconds 0.5 + notifyWorker, pool 10',
  backend: 'postgres',
  unsupported: { 'latency-xproc': XPROC },
  maxN: { job: [3000, 3000], fsm3: [1000, 1000] },
  notInQuick: { memory: 'slow: full run only' },
  create: async (ctx: CaseContext) => new PgBossInstance(ctx, 50),
};
