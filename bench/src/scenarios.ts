// The scenarios. Every case runs in a database created for it (and a Redis prefix of its own)
// and dropped afterwards, with a fresh engine instance.
import { fork, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Options } from './cli';
import { CpuProbe, type CpuDelta, type CpuSample } from './cpu';
import type { Adapter, CaseContext, CaseName, Hooks, Instance, Kind } from './engines/types';
import { sleep } from './engines/types';
import { casePrefix, clearRedisPrefix, createCaseDb, type CaseDb, type Infra } from './infra';
import { percentile } from './stats';
import type { ChildMessage, ChildRequest, MemoryOutcome } from './worker-child';

export type { MemoryOutcome } from './worker-child';

export interface RunCtx {
  infra: Infra;
  opts: Options;
  log: (m: string) => void;
  vlog: (m: string) => void;
}

/** One measured metric of one case, over its repeats. */
export interface Row {
  scenario: CaseName;
  engine: string;
  concurrency?: number;
  n?: number;
  metric: string;
  unit: string;
  better: 'higher' | 'lower';
  values: number[];
  /** The repeat each of `values` (and `cpuPer1k`) came from, for paired ratios. */
  reps?: number[];
  /** CPU ms per 1 000 jobs (steps for fsm3), worker + PostgreSQL (+ Redis), per repeat. */
  cpuPer1k?: number[];
  cpu?: CpuDelta[];
  extra?: Record<string, unknown>[];
  errors?: string[];
}

export class TimeoutError extends Error {}

/** Databases of running cases: dropped when the run is interrupted. */
export const activeDbs = new Set<CaseDb>();

/** Child processes of running cases: killed when their case ends, however it ends. */
const children = new Set<ChildProcess>();
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TimeoutError(`${what}: timed out after ${Math.round(ms / 1000)} s`)),
      ms,
    );
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Runs `fn` against a fresh database and engine instance; always closes the instance and drops
 * the database, also when `fn` fails or times out.
 */
async function inCase<T>(
  rc: RunCtx,
  adapter: Adapter,
  fn: (ctx: CaseContext, inst: Instance) => Promise<T>,
  opts: { instance?: boolean } = {},
): Promise<T> {
  const db = await createCaseDb(rc.infra);
  activeDbs.add(db);
  const ctx: CaseContext = {
    pgUrl: db.url,
    dbName: db.name,
    redisUrl: rc.infra.redisUrl,
    redisPrefix: casePrefix(),
    log: (m) => rc.log(`  [${adapter.id}] ${m}`),
  };
  let inst: Instance | undefined;
  try {
    if (opts.instance !== false) inst = await adapter.create(ctx);
    return await withTimeout(fn(ctx, inst!), rc.opts.caseTimeoutMs, adapter.id);
  } finally {
    for (const c of children) c.kill('SIGKILL');
    children.clear();
    if (inst)
      await withTimeout(inst.close(), 15_000, `${adapter.id} close`).catch((e) =>
        rc.log(`  ${String(e)}`),
      );
    if (adapter.backend === 'redis' && rc.infra.redisUrl)
      await clearRedisPrefix(rc.infra.redisUrl, ctx.redisPrefix).catch(() => undefined);
    await db.drop().catch((e) => rc.log(`  drop ${db.name}: ${String(e)}`));
    activeDbs.delete(db);
  }
}

async function openProbe(rc: RunCtx, adapter: Adapter, ctx: CaseContext): Promise<CpuProbe> {
  return CpuProbe.open(
    rc.infra.adminUrl,
    ctx.dbName,
    adapter.backend === 'redis' ? rc.infra.redisUrl : undefined,
  );
}

export interface DrainOutcome {
  rate: number;
  ms: number;
  startupMs: number;
  cpu: CpuDelta;
}

/**
 * drain / fsm3: pre-insert n instances (bulk API, not timed), start the workers, time from the
 * first step start until the engine's own records show every instance finished. The in-process
 * count of final steps says when to start asking the database (every 50 ms).
 */
export async function drainCase(
  rc: RunCtx,
  adapter: Adapter,
  kind: Kind,
  concurrency: number,
  n: number,
): Promise<DrainOutcome> {
  return inCase(rc, adapter, async (ctx, inst) => {
    await inst.setup();
    await inst.insertBulk(kind, n);
    const probe = await openProbe(rc, adapter, ctx);
    try {
      let finals = 0;
      let firstStart: number | undefined;
      let cpuAtFirst: Promise<CpuSample> | undefined;
      const all = deferred();
      const hooks: Hooks = {
        onStart: () => {
          if (firstStart === undefined) {
            firstStart = performance.now();
            cpuAtFirst = probe.sample();
          }
        },
        onFinal: () => {
          if (++finals >= n) all.resolve();
        },
      };
      const tCall = performance.now();
      await inst.start(kind, concurrency, hooks);
      await all.promise;
      while ((await inst.remaining(kind)) > 0) await sleep(50);
      const t1 = performance.now();
      const cpu = await probe.since(await cpuAtFirst!);
      const ms = t1 - firstStart!;
      const units = kind === 'fsm3' ? 3 * n : n;
      return { rate: (units / ms) * 1000, ms, startupMs: firstStart! - tCall, cpu };
    } finally {
      await probe.close();
    }
  });
}

export interface EnqueueOutcome {
  rate: number;
  ms: number;
  cpu: CpuDelta;
}

/** Awaited single inserts from `callers` concurrent callers, n in all; or one bulk call of n. */
export async function enqueueCase(
  rc: RunCtx,
  adapter: Adapter,
  mode: 'single' | 'bulk',
  n: number,
  callers = 50,
): Promise<EnqueueOutcome> {
  return inCase(rc, adapter, async (ctx, inst) => {
    await inst.setup();
    const probe = await openProbe(rc, adapter, ctx);
    try {
      const before = await probe.sample();
      const t0 = performance.now();
      if (mode === 'bulk') {
        await inst.insertBulk('job', n);
      } else {
        let issued = 0;
        await Promise.all(
          Array.from({ length: callers }, async () => {
            while (issued < n) {
              issued++;
              await inst.insertOne('job');
            }
          }),
        );
      }
      const ms = performance.now() - t0;
      const cpu = await probe.since(before);
      return { rate: (n / ms) * 1000, ms, cpu };
    } finally {
      await probe.close();
    }
  });
}

export interface LatencyOutcome {
  samples: number[];
  timeouts: number;
  p50: number;
  p95: number;
  p99: number;
}

/** Idle workers; `count` sequential inserts; insert call → first step start, same process. */
export async function latencyCase(
  rc: RunCtx,
  adapter: Adapter,
  count: number,
  concurrency = 10,
): Promise<LatencyOutcome> {
  return inCase(rc, adapter, async (_ctx, inst) => {
    await inst.setup();
    const started = new Map<number, (t: number) => void>();
    await inst.start('job', concurrency, {
      onStart: (m) => {
        const t = performance.now();
        if (m !== undefined) started.get(m)?.(t);
      },
    });
    await sleep(500); // let the workers settle into their idle state
    const samples: number[] = [];
    let timeouts = 0;
    for (let i = 0; i < count; i++) {
      const seen = new Promise<number | undefined>((resolve) => {
        started.set(i, resolve);
        setTimeout(() => resolve(undefined), 5000).unref();
      });
      const t0 = performance.now();
      await inst.insertOne('job', i);
      const t = await seen;
      started.delete(i);
      if (t === undefined) timeouts++;
      else samples.push(t - t0);
    }
    return {
      samples,
      timeouts,
      p50: percentile(samples, 50),
      p95: percentile(samples, 95),
      p99: percentile(samples, 99),
    };
  });
}

/**
 * Signal round trip: `count` instances parked on a signal (workers idle at concurrency 10);
 * for each in turn, the signal call → the woken step's start, same process.
 */
export async function signalCase(
  rc: RunCtx,
  adapter: Adapter,
  count: number,
  concurrency = 10,
): Promise<LatencyOutcome> {
  return inCase(rc, adapter, async (_ctx, inst) => {
    await inst.setup();
    const started = new Map<number, (t: number) => void>();
    await inst.parkForSignals!(count, concurrency, {
      onStart: (m) => {
        const t = performance.now();
        if (m !== undefined) started.get(m)?.(t);
      },
    });
    await sleep(300);
    const samples: number[] = [];
    let timeouts = 0;
    for (let i = 0; i < count; i++) {
      const seen = new Promise<number | undefined>((resolve) => {
        started.set(i, resolve);
        setTimeout(() => resolve(undefined), 5000).unref();
      });
      const t0 = performance.now();
      await inst.signal!(i);
      const t = await seen;
      started.delete(i);
      if (t === undefined) timeouts++;
      else samples.push(t - t0);
    }
    return {
      samples,
      timeouts,
      p50: percentile(samples, 50),
      p95: percentile(samples, 95),
      p99: percentile(samples, 99),
    };
  });
}

export interface ScaleOutcome {
  small: number;
  big: number;
  metric: string;
  unit: string;
  better: 'higher' | 'lower';
  detail: Record<string, unknown>;
}

export async function scaleCase(
  rc: RunCtx,
  adapter: Adapter,
  bigRows: number,
): Promise<ScaleOutcome> {
  const scale = adapter.scale!;
  const small = await inCase(rc, adapter, (ctx) => scale(ctx, 10_000, rc.opts.repeats), {
    instance: false,
  });
  const big = await inCase(rc, adapter, (ctx) => scale(ctx, bigRows, rc.opts.repeats), {
    instance: false,
  });
  return {
    small: small.value,
    big: big.value,
    metric: small.metric,
    unit: small.unit,
    better: small.better,
    detail: { small: small.detail, big: big.detail },
  };
}

/**
 * A worker in a child process of its own drains an n-row backlog (pre-inserted by this process
 * through the bulk API) at concurrency 100; the child samples its RSS every 20 ms.
 */
export async function memoryCase(
  rc: RunCtx,
  adapter: Adapter,
  n: number,
  concurrency = 100,
): Promise<MemoryOutcome> {
  return inCase(
    rc,
    adapter,
    async (ctx) => {
      const inst = await adapter.create(ctx);
      try {
        await inst.setup();
        for (let done = 0; done < n; done += 20_000)
          await inst.insertBulk('job', Math.min(20_000, n - done));
      } finally {
        await inst.close();
      }
      const child = spawnChild({
        mode: 'memory',
        adapter: adapter.id,
        ctx: plain(ctx),
        n,
        concurrency,
      });
      return new Promise<MemoryOutcome>((resolve, reject) => {
        child.on('message', (m: ChildMessage) => {
          if ('ok' in m) {
            if (m.ok) resolve(m.result);
            else reject(new Error(m.error));
          }
        });
        child.on('exit', (code) => reject(new Error(`worker child exited with ${code}`)));
      });
    },
    { instance: false },
  );
}

function plain(ctx: CaseContext): Omit<CaseContext, 'log'> {
  const { log, ...rest } = ctx;
  void log;
  return rest;
}

/** Forks bench/src/worker-child with `req`; killed when its case ends. */
function spawnChild(req: ChildRequest): ChildProcess {
  const child = fork(path.join(__dirname, 'worker-child.js'), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: ['--no-deprecation'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  child.send(req);
  return child;
}

/**
 * Cross-process latency: idle workers in a child process (concurrency 10), `count` sequential
 * inserts from this process; insert call → step start on the wall clock (both processes read
 * performance.timeOrigin + now(), sub-millisecond, same machine). Engines wake the other process
 * their own way: gen-durable with `poke: 'postgres'` on both nodes, graphile-worker and BullMQ
 * natively, DBOS by its queue poll.
 */
export async function latencyXCase(
  rc: RunCtx,
  adapter: Adapter,
  count: number,
  concurrency = 10,
): Promise<LatencyOutcome> {
  return inCase(
    rc,
    adapter,
    async (ctx0) => {
      const ctx: CaseContext = { ...ctx0, crossProcess: true };
      const inst = await adapter.create(ctx);
      try {
        await inst.setup();
        const child = spawnChild({
          mode: 'latency',
          adapter: adapter.id,
          ctx: plain(ctx),
          n: count,
          concurrency,
        });
        const started = new Map<number, (t: number) => void>();
        await new Promise<void>((resolve, reject) => {
          child.on('message', (m: ChildMessage) => {
            if ('ready' in m) resolve();
            else if ('start' in m) {
              if (m.start !== undefined) started.get(m.start)?.(m.t);
            } else if ('ok' in m && !m.ok) reject(new Error(m.error));
          });
          child.on('exit', (code) => reject(new Error(`worker child exited with ${code}`)));
        });
        await sleep(500);
        const samples: number[] = [];
        let timeouts = 0;
        for (let i = 0; i < count; i++) {
          const seen = new Promise<number | undefined>((resolve) => {
            started.set(i, resolve);
            setTimeout(() => resolve(undefined), 5000).unref();
          });
          const t0 = performance.timeOrigin + performance.now();
          await inst.insertOne('job', i);
          const t = await seen;
          started.delete(i);
          if (t === undefined) timeouts++;
          else samples.push(t - t0);
        }
        child.send({ stop: true });
        await new Promise<void>((resolve) => {
          if (child.exitCode !== null) resolve();
          child.on('exit', () => resolve());
          setTimeout(resolve, 10_000).unref();
        });
        return {
          samples,
          timeouts,
          p50: percentile(samples, 50),
          p95: percentile(samples, 95),
          p99: percentile(samples, 99),
        };
      } finally {
        await inst.close();
      }
    },
    { instance: false },
  );
}
