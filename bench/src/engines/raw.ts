// The raw baseline: the floor this PostgreSQL allows for a durable queue. A minimal table,
// claimed 50 rows at a time with FOR UPDATE SKIP LOCKED (one autocommit statement that marks
// them running), completed with one batched UPDATE … WHERE id = ANY($1) per flush (group commit:
// everything that finished while the previous flush ran goes in the next one). New work is
// discovered by an in-process wake-up after a local insert (same process, like
// gen-durable's `poke: 'local'`), by refilling after completions, and by a 500 ms poll.
// No leases, retries, heartbeats, or anything else an engine needs: not an engine.
// `raw` claims what its free slots take (at most 50); `raw:batch50` claims 50 at a time whatever
// the concurrency and runs them `concurrency` at a time from a local buffer (the shape of the
// external harness's raw baseline in issue 35: fewer, fuller claims at c = 10).
import { performance } from 'node:perf_hooks';
import { Pool, type PoolClient } from 'pg';
import type { Adapter, CaseContext, Hooks, Instance, Kind, ScaleResult } from './types';
import { version } from './types';

const BATCH = 50;
const POLL_MS = 500;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id bigserial PRIMARY KEY,
  status text NOT NULL DEFAULT 'runnable',
  step int NOT NULL DEFAULT 1,
  payload jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS jobs_runnable ON jobs (id) WHERE status = 'runnable';`;

/**
 * The production claim: one statement, locks and marks up to $1 runnable rows. `= ANY(ARRAY(…))`
 * rather than `IN (…)`: the planner may hash-join `IN` against a sequential scan of the whole
 * table (it does at 10 000 rows), the array form always probes the primary key per picked id.
 */
export const RAW_CLAIM = `UPDATE jobs SET status = 'running'
WHERE id = ANY(ARRAY(SELECT id FROM jobs WHERE status = 'runnable' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
RETURNING id, step, payload`;

/** The batched completion: finishes (or, for fsm3, advances) every id in $1. */
const RAW_COMPLETE = `UPDATE jobs SET
  status = CASE WHEN step >= $2 THEN 'done' ELSE 'runnable' END,
  step = CASE WHEN step >= $2 THEN step ELSE step + 1 END
WHERE id = ANY($1::bigint[])`;

interface Row {
  id: string;
  step: number;
  payload: { m?: number };
}

class RawInstance implements Instance {
  private readonly pool: Pool;
  /** Claimed rows waiting for a slot (`raw:batch50` only). */
  private buffer: Row[] = [];
  private running = false;
  private concurrency = 0;
  private inflight = 0;
  private fetching = false;
  private fetchAgain = false;
  private pumpQueued = false;
  private flushing = false;
  private flushQueued = false;
  private done: string[] = [];
  private pollTimer: NodeJS.Timeout | undefined;
  private hooks: Hooks = {};
  private finalStep = 1;
  private stopped: Promise<void> | undefined;

  constructor(
    private readonly ctx: CaseContext,
    /** Claim full batches of 50 into a local buffer instead of the free slots' worth. */
    private readonly prefetch = false,
  ) {
    this.pool = new Pool({ connectionString: ctx.pgUrl, max: 10 });
    this.pool.on('error', () => undefined);
  }

  async setup(): Promise<void> {
    await this.pool.query(SCHEMA);
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    void kind;
    const payloads = new Array<string>(n).fill('{}');
    await this.pool.query('INSERT INTO jobs (payload) SELECT unnest($1::jsonb[])', [payloads]);
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    void kind;
    await this.pool.query('INSERT INTO jobs (payload) VALUES ($1)', [
      JSON.stringify(marker === undefined ? {} : { m: marker }),
    ]);
    this.schedulePump();
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    this.finalStep = kind === 'fsm3' ? 3 : 1;
    this.concurrency = concurrency;
    this.hooks = hooks;
    this.running = true;
    this.schedulePump();
  }

  private schedulePump(): void {
    if (!this.running || this.pumpQueued) return;
    this.pumpQueued = true;
    setImmediate(() => {
      this.pumpQueued = false;
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (!this.running) return;
    this.dispatch();
    if (this.fetching) {
      this.fetchAgain = true; // a wake-up during a fetch must not be lost
      return;
    }
    this.fetchAgain = false;
    const want = this.prefetch
      ? BATCH - this.inflight - this.buffer.length
      : Math.min(BATCH, this.concurrency - this.inflight);
    // A prefetching claim waits until its buffer is at most half full (fuller claims).
    if (want <= 0 || (this.prefetch && want < BATCH / 2 && this.buffer.length > 0)) return;
    this.fetching = true;
    let rows: Row[] = [];
    try {
      rows = (await this.pool.query<Row>(RAW_CLAIM, [want])).rows;
    } catch (e) {
      if (this.running) this.ctx.log(`raw: claim failed: ${String(e)}`);
    } finally {
      this.fetching = false;
    }
    this.buffer.push(...rows);
    this.dispatch();
    if (rows.length === want || this.fetchAgain) {
      this.schedulePump();
    } else if (this.running) {
      clearTimeout(this.pollTimer);
      this.pollTimer = setTimeout(() => void this.pump(), POLL_MS);
    }
  }

  /** Starts buffered rows while slots are free. */
  private dispatch(): void {
    while (this.inflight < this.concurrency && this.buffer.length > 0) {
      this.inflight++;
      void this.run(this.buffer.shift()!);
    }
  }

  private async run(row: Row): Promise<void> {
    if (row.step === 1) this.hooks.onStart?.(row.payload.m);
    await Promise.resolve(); // the (trivial, async) step
    if (row.step >= this.finalStep) this.hooks.onFinal?.();
    this.done.push(row.id);
    this.inflight--;
    this.scheduleFlush();
    this.schedulePump();
  }

  private scheduleFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.flushing || this.stopped) return;
    this.flushing = true;
    try {
      while (this.done.length > 0) {
        const ids = this.done;
        this.done = [];
        await this.pool.query(RAW_COMPLETE, [ids, this.finalStep]);
      }
    } catch (e) {
      this.ctx.log(`raw: flush failed: ${String(e)}`);
    } finally {
      this.flushing = false;
    }
    // Rows finished after a flush turned to re-runnable need a pick (fsm3).
    if (this.finalStep > 1) this.schedulePump();
  }

  async remaining(kind: Kind): Promise<number> {
    void kind;
    const r = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM jobs WHERE status <> 'done'`,
    );
    return Number(r.rows[0]!.n);
  }

  async close(): Promise<void> {
    this.running = false;
    clearTimeout(this.pollTimer);
    this.stopped ??= (async () => {
      for (let i = 0; i < 100 && (this.fetching || this.flushing || this.flushQueued); i++)
        await new Promise((r) => setTimeout(r, 10));
      await this.pool.end();
    })();
    await this.stopped;
  }
}

/** Claim cost with `total` rows in the table: median time of one 50-row claim. */
async function rawScale(ctx: CaseContext, total: number, repeats: number): Promise<ScaleResult> {
  const pool = new Pool({ connectionString: ctx.pgUrl, max: 2 });
  try {
    await pool.query(SCHEMA.replace(/CREATE INDEX[^;]*;/, ''));
    // 70 % done, 29.5 % runnable, 0.5 % running, interleaved by id.
    await pool.query(
      `INSERT INTO jobs (status, payload)
       SELECT CASE WHEN g % 1000 < 700 THEN 'done' WHEN g % 1000 < 995 THEN 'runnable' ELSE 'running' END, '{}'
       FROM generate_series(1, $1::int) g`,
      [total],
    );
    await pool.query(`CREATE INDEX jobs_runnable ON jobs (id) WHERE status = 'runnable'`);
    await pool.query('VACUUM ANALYZE jobs');
    const c: PoolClient = await pool.connect();
    try {
      const explain = (await explainClaim(c)).join('\n');
      for (let i = 0; i < 3; i++) await c.query(RAW_CLAIM, [BATCH]); // warm-up
      // The statement is timed inside an explicit transaction and committed untimed: the commit
      // (WAL flush) costs the same at any table size and would hide the scan.
      const times: number[] = [];
      const claims = Math.max(20, repeats * 10);
      for (let i = 0; i < claims; i++) {
        await c.query('BEGIN');
        const t0 = performance.now();
        const r = await c.query(RAW_CLAIM, [BATCH]);
        times.push(performance.now() - t0);
        await c.query('COMMIT');
        if (r.rowCount !== BATCH) throw new Error(`raw scale: claim returned ${r.rowCount} rows`);
      }
      times.sort((a, b) => a - b);
      return {
        metric: 'claim of 50 rows',
        unit: 'ms',
        better: 'lower',
        value: times[Math.floor(times.length / 2)]!,
        detail: { claims, minMs: times[0], maxMs: times[times.length - 1], explain },
      };
    } finally {
      c.release();
    }
  } finally {
    await pool.end();
  }
}

async function explainClaim(c: PoolClient): Promise<string[]> {
  await c.query('BEGIN');
  try {
    const r = await c.query<{ 'QUERY PLAN': string }>(
      'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ' + RAW_CLAIM,
      [BATCH],
    );
    return r.rows.map((x) => x['QUERY PLAN']);
  } finally {
    await c.query('ROLLBACK');
  }
}

/** What both raw adapters share: the family, the peer and the backend. */
const RAW = {
  family: 'raw',
  peer: `raw SQL (pg ${version('pg')})`,
  backend: 'postgres',
  unsupported: { 'latency-xproc': 'the baseline wakes in-process only' },
} as const;

export const rawAdapter: Adapter = {
  ...RAW,
  id: 'raw',
  settings:
    'claim the free slots (at most 50) with FOR UPDATE SKIP LOCKED, one batched UPDATE per flush, pool 10',
  create: async (ctx) => new RawInstance(ctx),
  scale: rawScale,
};

export const rawBatch50Adapter: Adapter = {
  ...RAW,
  id: 'raw:batch50',
  settings:
    'claim 50 at a time with FOR UPDATE SKIP LOCKED into a local buffer, run `concurrency` at a time, one batched UPDATE per flush, pool 10',
  create: async (ctx) => new RawInstance(ctx, true),
};
