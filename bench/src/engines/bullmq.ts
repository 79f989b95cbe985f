// BullMQ through its public API (Queue, Worker), on Redis and on the PostgreSQL backend that
// BullMQ 6 ships in the same package (`createPostgresBackend`, LISTEN/NOTIFY wake-ups; there is
// no separate npm package for it). Jobs are added with removeOnComplete / removeOnFail (the
// usual production setting); Worker `concurrency` = the case concurrency. Inserts: Queue.add
// (single) and Queue.addBulk (bulk). fsm3 is a chain: step n adds the job for step n+1 before it
// completes.
import {
  Queue,
  Worker,
  createPostgresBackend,
  type Job,
  type JobProgress,
  type PostgresConnectionOptions,
  type PostgresQueueBackend,
} from 'bullmq';
import Redis from 'ioredis';
import type { Adapter, CaseContext, Hooks, Instance, Kind } from './types';
import { version } from './types';

interface Payload {
  s?: number;
  m?: number;
}

const JOB_OPTS = { removeOnComplete: true, removeOnFail: true };

class BullInstance implements Instance {
  private redis: Redis | undefined;
  private readonly queues = new Map<Kind, Queue>();
  private workers: Worker[] = [];

  constructor(
    private readonly ctx: CaseContext,
    private readonly backend: 'redis' | 'postgres',
  ) {}

  private name(kind: Kind): string {
    return kind === 'fsm3' ? 'bench3' : 'bench1';
  }

  private pgConnection(): { connectionString: string; migrate: boolean; max: number } {
    return { connectionString: this.ctx.pgUrl, migrate: true, max: 10 };
  }

  private makeQueue(kind: Kind): Queue {
    if (this.backend === 'redis') {
      return new Queue(this.name(kind), {
        connection: this.redis!,
        prefix: this.ctx.redisPrefix,
        defaultJobOptions: JOB_OPTS,
      });
    }
    return new Queue(
      this.name(kind),
      { connection: this.pgConnection(), defaultJobOptions: JOB_OPTS },
      createPostgresBackend,
    ) as unknown as Queue;
  }

  async setup(): Promise<void> {
    if (this.backend === 'redis') {
      if (!this.ctx.redisUrl) throw new Error('no Redis');
      this.redis = new Redis(this.ctx.redisUrl, { maxRetriesPerRequest: null });
    }
    for (const kind of ['job', 'fsm3'] as const) {
      const q = this.makeQueue(kind);
      q.on('error', (e) => this.ctx.log(`bullmq queue: ${e.message}`));
      await q.waitUntilReady();
      this.queues.set(kind, q);
    }
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    const data: Payload = kind === 'fsm3' ? { s: 1 } : {};
    const q = this.queues.get(kind)!;
    // One addBulk call per 5 000 jobs (one MULTI / one transaction each).
    for (let done = 0; done < n; done += 5000) {
      const k = Math.min(5000, n - done);
      await q.addBulk(Array.from({ length: k }, () => ({ name: 'j', data })));
    }
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    const data: Payload = kind === 'fsm3' ? { s: 1 } : {};
    if (marker !== undefined) data.m = marker;
    await this.queues.get(kind)!.add('j', data);
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    const q = this.queues.get(kind)!;
    const processor = async (job: Job<Payload>): Promise<void> => {
      const s = job.data.s ?? 1;
      if (s === 1) hooks.onStart?.(job.data.m);
      if (kind === 'fsm3' && s < 3) {
        await q.add('j', { s: s + 1 });
      } else {
        hooks.onFinal?.();
      }
    };
    const w =
      this.backend === 'redis'
        ? new Worker<Payload>(this.name(kind), processor, {
            connection: this.redis!,
            prefix: this.ctx.redisPrefix,
            concurrency,
          })
        : (new Worker<
            Payload,
            void,
            string,
            PostgresQueueBackend,
            JobProgress,
            PostgresConnectionOptions
          >(
            this.name(kind),
            processor,
            { connection: this.pgConnection(), concurrency },
            createPostgresBackend,
          ) as unknown as Worker<Payload>);
    w.on('error', (e) => this.ctx.log(`bullmq worker: ${e.message}`));
    await w.waitUntilReady();
    this.workers.push(w);
  }

  async remaining(kind: Kind): Promise<number> {
    const counts = await this.queues
      .get(kind)!
      .getJobCounts('wait', 'active', 'delayed', 'prioritized', 'waiting-children');
    return Object.values(counts).reduce((a, b) => a + b, 0);
  }

  async close(): Promise<void> {
    for (const w of this.workers) await w.close().catch(() => undefined);
    for (const q of this.queues.values()) await q.close().catch(() => undefined);
    // The case's keys are deleted by the harness when the case ends (not here: the memory case
    // pre-loads with one instance and drains with another).
    this.redis?.disconnect();
  }
}

const v = version('bullmq');

export const bullRedis: Adapter = {
  id: 'bullmq:redis',
  family: 'bullmq',
  peer: `bullmq ${v} (ioredis ${version('ioredis')})`,
  settings: 'Redis, Worker concurrency = C, removeOnComplete/removeOnFail',
  backend: 'redis',
  unsupported: {},
  create: async (ctx: CaseContext) => new BullInstance(ctx, 'redis'),
};

export const bullPostgres: Adapter = {
  id: 'bullmq:postgres',
  family: 'bullmq',
  peer: `bullmq ${v} (built-in PostgreSQL backend)`,
  settings:
    'createPostgresBackend, pool 10 per Queue/Worker, Worker concurrency = C, removeOnComplete/removeOnFail',
  backend: 'postgres',
  unsupported: {
    memory: 'about 1 000 jobs/s here: a 100 000 backlog takes minutes (see drain for its rate)',
  },
  maxN: { job: [5000, 3000], fsm3: [1000, 500] },
  notInQuick: { 'latency-xproc': 'full run only' },
  create: async (ctx: CaseContext) => new BullInstance(ctx, 'postgres'),
};
