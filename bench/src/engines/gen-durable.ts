// gen-durable through its public API (docs/design.md §2): a Nest application context importing
// GenDurableModule with `queues: { default: C }` and `poke: 'local'`, two FSM providers
// (`bench1`: a job whose perform() returns undefined; `bench3`: start → b → c with next, next,
// done), EngineService.insertAll for bulk and insert for single inserts, GenDurableMigration.up
// for the schema. Completion is read from the table the engine writes:
// SELECT count(*) FROM gen_durable WHERE status IN ('done', 'failed').
//
// Compiled from the library source (`../../../lib`) by bench/tsconfig.json — tsc, so decorator
// metadata is emitted as Nest needs — into bench/dist/lib; scripts/run-bench.cjs leaves this file
// out while lib/index.ts does not export the API yet, and the harness then prints
// "gen-durable: not built yet".
import 'reflect-metadata';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import {
  awaitSignal,
  DurableFsm,
  EngineService,
  GenDurableMigration,
  GenDurableModule,
  Step,
  done,
  next,
  type StepContext,
} from '../../../lib';
import type { Adapter, CaseContext, Hooks, Instance, Kind, ScaleResult } from './types';
import { sleep } from './types';

interface BenchState {
  m?: number;
}

/** Hooks of the case being run (FSM providers are singletons created by Nest). */
let current: Hooks = {};

@DurableFsm({ name: 'bench1' })
class Bench1Fsm {
  perform(args: BenchState, _ctx: StepContext<BenchState>): undefined {
    current.onStart?.(args.m);
    current.onFinal?.();
    return undefined;
  }
}

@DurableFsm({ name: 'bench3' })
class Bench3Fsm {
  @Step() start(ctx: StepContext<BenchState>) {
    current.onStart?.(ctx.state.m);
    return next('b', ctx.state);
  }
  @Step('b') b(ctx: StepContext<BenchState>) {
    return next('c', ctx.state);
  }
  @Step('c') c(_ctx: StepContext<BenchState>) {
    current.onFinal?.();
    return done({});
  }
}

/** Parks on signal `go`; the woken step is the one timed. */
@DurableFsm({ name: 'benchsig' })
class BenchSigFsm {
  @Step() start(ctx: StepContext<BenchState>) {
    return awaitSignal('go', 'woken', ctx.state);
  }
  @Step('woken') woken(ctx: StepContext<BenchState>) {
    current.onStart?.(ctx.state.m);
    return done({});
  }
}

function fsmClass(kind: Kind): typeof Bench1Fsm | typeof Bench3Fsm {
  return kind === 'fsm3' ? Bench3Fsm : Bench1Fsm;
}
function fsmName(kind: Kind): string {
  return kind === 'fsm3' ? 'bench3' : 'bench1';
}

/**
 * `defaults`, `tuned`, `direct-insert`: see the constructor. `otel-off`, `otel-api`,
 * `otel-sdk`: tuned, with `otel: { enabled: false }` (the API never loaded), with the API
 * loaded and no provider registered, and with an SDK tracer provider registered.
 */
type Variant = 'defaults' | 'tuned' | 'direct-insert' | 'otel-off' | 'otel-api' | 'otel-sdk';

/** Accepts every batch and keeps nothing (the SDK's work without a network). */
class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

class GenDurableInstance implements Instance {
  private ds: DataSource | undefined;
  private app: INestApplicationContext | undefined;
  private engine: EngineService | undefined;

  constructor(
    private readonly ctx: CaseContext,
    /**
     * `defaults`: the module's defaults (only `queues` and, across processes, `poke` given).
     * `tuned`: the fast settings of a queue of short jobs, given explicitly. `direct-insert`:
     * tuned plus `insertBatcher: { durable: false }` (each awaited insert its own statement,
     * the default before group commit became it: docs/performance.md "Group-commit inserts").
     */
    private readonly variant: Variant = 'defaults',
  ) {}

  /** The tracer provider an `otel-sdk` case registers while it runs (unregistered at close). */
  private tracerProvider: BasicTracerProvider | undefined;

  async setup(): Promise<void> {
    this.ds = new DataSource({ type: 'postgres', url: this.ctx.pgUrl, extra: { max: 10 } });
    await this.ds.initialize();
    const qr = this.ds.createQueryRunner();
    try {
      await GenDurableMigration.up(qr);
    } finally {
      await qr.release();
    }
    // A node with no local queue: inserts only, until start() replaces it with a worker node.
    await this.boot({});
  }

  private async boot(queues: Record<string, number>): Promise<void> {
    // Tuned: prefetch max(100, 2C) − C, so the local buffer (running + prefetched) is the size
    // of graphile-worker's batched localQueue, max(100, 2C); reaper and GC off. Defaults: none
    // of that (the module adapts prefetch to the queue's concurrency and step times itself).
    const concurrency = Math.max(0, ...Object.values(queues));
    const prefetch = concurrency === 0 ? 0 : Math.max(100, 2 * concurrency) - concurrency;
    const poke = this.ctx.crossProcess ? ('postgres' as const) : ('local' as const);
    const tuning =
      this.variant === 'defaults'
        ? { poke }
        : {
            poke,
            reaper: false as const,
            gc: false as const,
            prefetch,
            ...(this.variant === 'direct-insert' ? { insertBatcher: { durable: false } } : {}),
            // Tracing cost (docs/performance.md): otel-off never loads the API (as without the
            // peer installed); otel-api and otel-sdk run with the default `otel`.
            ...(this.variant === 'otel-off' ? { otel: { enabled: false } } : {}),
          };
    if (this.app) await this.app.close();
    const dataSource = this.ds!;
    @Module({
      imports: [GenDurableModule.forRoot({ dataSource, queues, ...tuning })],
      providers: [Bench1Fsm, Bench3Fsm, BenchSigFsm],
    })
    class BenchModule {}
    this.app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error'] });
    await this.app.init();
    this.engine = this.app.get(EngineService);
  }

  async insertBulk(kind: Kind, n: number): Promise<void> {
    const entries = Array.from({ length: n }, () => ({ state: {} }));
    await this.engine!.insertAll(fsmClass(kind), entries);
  }

  async insertOne(kind: Kind, marker?: number): Promise<void> {
    await this.engine!.insert(fsmClass(kind), { state: marker === undefined ? {} : { m: marker } });
  }

  async start(kind: Kind, concurrency: number, hooks: Hooks): Promise<void> {
    void kind;
    current = hooks;
    if (this.variant === 'otel-sdk' && !this.tracerProvider) {
      // A real SDK pipeline whose exporter drops the batches: spans are made, recorded,
      // batched and handed over, as with any exporter, minus the network.
      this.tracerProvider = new BasicTracerProvider({
        spanProcessors: [new BatchSpanProcessor(new DroppingExporter())],
      });
      trace.setGlobalTracerProvider(this.tracerProvider);
    }
    await this.boot({ default: concurrency });
  }

  async remaining(kind: Kind): Promise<number> {
    const r = (await this.ds!.query(
      `SELECT count(*) FILTER (WHERE status NOT IN ('done', 'failed')) AS n FROM gen_durable WHERE fsm = $1`,
      [fsmName(kind)],
    )) as Array<{ n: string }>;
    return Number(r[0]!.n);
  }

  private parked: string[] = [];

  async parkForSignals(count: number, concurrency: number, hooks: Hooks): Promise<void> {
    await this.start('job', concurrency, hooks);
    this.parked = [];
    for (let i = 0; i < count; i++)
      this.parked.push(await this.engine!.insert(BenchSigFsm, { state: { m: i } }));
    for (let k = 0; k < 600; k++) {
      const r = (await this.ds!.query(
        `SELECT count(*) AS n FROM gen_durable WHERE fsm = 'benchsig' AND status = 'awaiting_signal'`,
      )) as Array<{ n: string }>;
      if (Number(r[0]!.n) >= count) return;
      await sleep(50);
    }
    throw new Error('gen-durable: instances did not park within 30 s');
  }

  async signal(i: number): Promise<void> {
    await this.engine!.signal({ id: this.parked[i]! }, 'go');
  }

  async close(): Promise<void> {
    current = {};
    await this.app?.close().catch((e) => this.ctx.log(`gen-durable close: ${String(e)}`));
    if (this.tracerProvider) {
      await this.tracerProvider.shutdown().catch(() => undefined);
      trace.disable();
      this.tracerProvider = undefined;
    }
    await this.ds?.destroy().catch(() => undefined);
  }
}

/**
 * Scale: the engine's claim is internal, so this measures it end to end — the step rate over the
 * first `take` completions with `total` rows in gen_durable (70 % done, 29.5 % runnable in the
 * served queue, 0.5 % parked on a signal), at concurrency 50.
 */
async function genDurableScale(
  ctx: CaseContext,
  total: number,
  repeats: number,
): Promise<ScaleResult> {
  void repeats;
  const inst = new GenDurableInstance(ctx);
  try {
    await inst.setup();
    const ds = (inst as unknown as { ds: DataSource }).ds;
    // Runnable rows through the public API, in chunks; terminal and parked rows cloned from one
    // of them by SQL (same columns the engine wrote, different status).
    const runnable = Math.round(total * 0.295);
    for (let doneN = 0; doneN < runnable; doneN += 20000)
      await inst.insertBulk('job', Math.min(20000, runnable - doneN));
    const doneRows = Math.round(total * 0.7);
    const parked = total - runnable - doneRows;
    await ds.query(
      `INSERT INTO gen_durable (fsm, fsm_version, step, status, state, queue, updated_at)
       SELECT t.fsm, t.fsm_version, t.step, 'done', t.state, t.queue, now() FROM (SELECT * FROM gen_durable LIMIT 1) t, generate_series(1, $1::int)`,
      [doneRows],
    );
    await ds.query(
      `INSERT INTO gen_durable (fsm, fsm_version, step, status, state, queue, awaits)
       SELECT t.fsm, t.fsm_version, t.step, 'awaiting_signal', t.state, t.queue, ARRAY['never'] FROM (SELECT * FROM gen_durable LIMIT 1) t, generate_series(1, $1::int)`,
      [parked],
    );
    await ds.query('VACUUM ANALYZE gen_durable');
    const take = Math.min(5000, Math.floor(runnable * 0.8));
    // Timed from the first step start (the application context's boot is not the pick's cost).
    let finished = 0;
    let t0 = 0;
    let t1 = 0;
    const reached = new Promise<void>((resolve) => {
      void inst.start('job', 50, {
        onStart: () => {
          if (t0 === 0) t0 = performance.now();
        },
        onFinal: () => {
          if (++finished === take) {
            t1 = performance.now();
            resolve();
          }
        },
      });
    });
    await Promise.race([
      reached,
      sleep(120_000).then(() => Promise.reject(new Error('gen-durable scale: timeout'))),
    ]);
    return {
      metric: 'drain rate, first ≤ 5 000 steps, c=50',
      unit: 'steps/s',
      better: 'higher',
      value: (take / (t1 - t0)) * 1000,
      detail: { take, runnable, doneRows, parked },
    };
  } finally {
    await inst.close();
  }
}

export const genDurableAdapter: Adapter = {
  id: 'gen-durable',
  family: 'gen-durable',
  peer: 'gen-durable (this repo, lib/)',
  settings:
    "defaults: queues { default: C } and nothing else (poke 'postgres' across processes); plain insert() (group-committed by default), DataSource pool 10",
  backend: 'postgres',
  unsupported: {},
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx),
  scale: genDurableScale,
  signals: true,
};

/** The same engine with the fast settings of a queue of short jobs given explicitly. */
export const genDurableTuned: Adapter = {
  id: 'gen-durable:tuned',
  family: 'gen-durable',
  peer: 'gen-durable (this repo, lib/)',
  settings:
    "queues { default: C }, prefetch max(100, 2C) − C, reaper/gc off, poke 'local' ('postgres' across processes)",
  backend: 'postgres',
  unsupported: {
    'enqueue-single': 'inserts do not depend on these settings: measured on gen-durable',
    'enqueue-bulk': 'inserts do not depend on these settings: measured on gen-durable',
    scale: 'measured on gen-durable',
    memory: 'measured on gen-durable',
    signal: 'measured on gen-durable',
  },
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx, 'tuned'),
  signals: true,
};

/**
 * The same engine without group-commit awaited inserts (docs/design.md §26.11, on by default):
 * each awaited insert is its own statement. Only the insert cases differ.
 */
export const genDurableDirectInsert: Adapter = {
  id: 'gen-durable:direct-insert',
  family: 'gen-durable',
  peer: 'gen-durable (this repo, lib/)',
  settings:
    'as gen-durable:tuned, plus insertBatcher { durable: false } (each awaited insert() its own statement)',
  backend: 'postgres',
  unsupported: {
    drain: 'same engine as gen-durable: only inserts differ',
    fsm3: 'same engine as gen-durable: only inserts differ',
    'enqueue-bulk': 'insertAll is one statement either way',
    scale: 'same engine as gen-durable: only inserts differ',
    memory: 'same engine as gen-durable: only inserts differ',
    'latency-xproc': 'same engine as gen-durable: measured there',
    signal: 'same engine as gen-durable: measured there',
  },
  signals: true,
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx, 'direct-insert'),
};

/**
 * The tracing-cost variants' family: run only when asked (`--only gen-durable-otel`), never in
 * a default run (docs/performance.md, "Tracing cost").
 */
export const OTEL_FAMILY = 'gen-durable-otel';

/** Only drain and fsm3: the tracing variants differ in the step path alone. */
const TRACING_ONLY: Adapter['unsupported'] = {
  'enqueue-single': 'tracing cost: measured by drain and fsm3',
  'enqueue-bulk': 'tracing cost: measured by drain and fsm3',
  latency: 'tracing cost: measured by drain and fsm3',
  'latency-xproc': 'tracing cost: measured by drain and fsm3',
  signal: 'tracing cost: measured by drain and fsm3',
  scale: 'tracing cost: measured by drain and fsm3',
  memory: 'tracing cost: measured by drain and fsm3',
};

/** Tracing cost baseline: gen-durable:tuned with `otel: { enabled: false }` (the API never loaded). */
export const genDurableOtelOff: Adapter = {
  id: 'gen-durable:otel-off',
  family: OTEL_FAMILY,
  peer: 'gen-durable (this repo, lib/)',
  settings: 'as gen-durable:tuned, plus otel { enabled: false }: @opentelemetry/api never loaded',
  backend: 'postgres',
  unsupported: TRACING_ONLY,
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx, 'otel-off'),
};

/** gen-durable:tuned with the API loaded and no provider registered (tracing off). */
export const genDurableOtelApi: Adapter = {
  id: 'gen-durable:otel-api',
  family: OTEL_FAMILY,
  peer: 'gen-durable (this repo, lib/)',
  settings: 'as gen-durable:tuned; @opentelemetry/api loaded, no provider registered',
  backend: 'postgres',
  unsupported: TRACING_ONLY,
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx, 'otel-api'),
};

/** gen-durable:tuned with an SDK tracer provider registered (tracing on, every step a span). */
export const genDurableOtelSdk: Adapter = {
  id: 'gen-durable:otel-sdk',
  family: OTEL_FAMILY,
  peer: 'gen-durable (this repo, lib/)',
  settings:
    'as gen-durable:tuned; BasicTracerProvider + BatchSpanProcessor (exporter drops the batches) registered',
  backend: 'postgres',
  unsupported: TRACING_ONLY,
  create: async (ctx: CaseContext) => new GenDurableInstance(ctx, 'otel-sdk'),
};
