import type { INestApplicationContext, ModuleMetadata, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  type EngineService,
  getEngineToken,
  GenDurableModule,
  type GenDurableEvent,
  type GenDurableEventName,
  type GenDurableOptions,
} from '../../lib';
import type { ClaimedRow } from '../../lib/runtime/claimed-row';
import { trackResource } from './open-resources';
import type { TestDatabase } from './test-database';

// The one way a spec boots an engine: `bootEngine(db, providers, options)` gives a Nest
// application context with GenDurableModule over `db`'s DataSource, the FSM providers, the FAST
// timings below unless `{ raw: true }`, and a record of events and statements. Tracked: the
// leak check fails the file if it is not closed.

/**
 * Fast timings for tests (lease 2 s, heartbeat 0.5 s, reaper 0.25 s, poll 50 ms), and a fixed
 * prefetch of 0 and minDemand of 1 instead of the adaptive defaults, so that what a spec
 * claims does not depend on how fast its steps ran (test/engine/running-slots.spec.ts covers
 * `'auto'`).
 */
export const FAST: Partial<GenDurableOptions> = {
  leaseTtl: 2000,
  heartbeatInterval: 500,
  pollInterval: 50,
  maxPollInterval: 200,
  reaper: { interval: 250 },
  drainTimeout: 1000,
  prefetch: 0,
  minDemand: 1,
};

/**
 * Statements a scheduler runs beside its picks only while a pinned xmin horizon engages the
 * claim floor (docs/design.md §5.3.1): PROBE_BEHIND_FLOOR. A snapshot's xmin is cluster-wide,
 * so another test file's open write transaction can be that pin, and under load an empty
 * queue's claim can take the 0.5 ms that engages the floor then. The statement lists tests
 * assert are those of a pick and a flush, so the harness leaves the look out of them; the
 * floor's own tests read its statements directly.
 */
export const BACKGROUND_LOOKS: ReadonlySet<string> = new Set(['probe_behind_floor']);

/**
 * An engine app whose events$ are recorded from before `init()`, so boot-time events
 * (scheduler:reclaimed, boot:warning, the first pick) are seen too, and whose statements are
 * recorded from the end of `init()` on.
 */
export interface Harness {
  readonly app: INestApplicationContext;
  readonly engine: EngineService;
  /** Every event since boot (or the last `clear()`). */
  readonly events: GenDurableEvent[];
  /**
   * Names of the statements run since the end of boot (or the last `clear()`), but the claim
   * floor's look behind itself ({@link BACKGROUND_LOOKS}).
   */
  readonly statements: string[];
  /** Forgets the events and statements recorded so far. */
  clear(): void;
  /** Events named `name` (optionally filtered by metadata.id). */
  eventsOf(name: GenDurableEventName, id?: string): GenDurableEvent[];
  /** Resolves with the first event named `name` matching `match` (past or future). */
  waitFor(
    name: GenDurableEventName,
    match?: (e: GenDurableEvent) => boolean,
    timeoutMs?: number,
  ): Promise<GenDurableEvent>;
  close(): Promise<void>;
}

export interface BootOptions {
  /** Extra Nest module metadata (imports/providers) beside GenDurableModule. */
  readonly imports?: ModuleMetadata['imports'];
  /** Skip FAST timings. */
  readonly raw?: boolean;
}

export async function bootEngine(
  db: TestDatabase,
  providers: Provider[],
  options: Partial<GenDurableOptions> = {},
  boot: BootOptions = {},
): Promise<Harness> {
  const dataSource = await db.dataSource();
  const moduleRef = await Test.createTestingModule({
    imports: [
      GenDurableModule.forRoot({ dataSource, ...(boot.raw ? {} : FAST), ...options }),
      ...(boot.imports ?? []),
    ],
    providers,
  }).compile();
  // By token: a named engine is not provided under the EngineService class (docs/design.md §2.1).
  const engine = moduleRef.get<EngineService>(getEngineToken(options.name));
  const events: GenDurableEvent[] = [];
  const listeners = new Set<(e: GenDurableEvent) => void>();
  const subscription = engine.events$.subscribe((e) => {
    events.push(e);
    for (const l of listeners) l(e);
  });
  let open = true;
  trackResource(`engine app on ${db.name}`, () => open);
  try {
    // The runtime (and its SqlExecutor) exists after onModuleInit; record from bootstrap on.
    await moduleRef.init();
  } catch (err) {
    subscription.unsubscribe();
    await moduleRef.close().catch(() => undefined);
    open = false;
    throw err;
  }
  const stmts: string[] = [];
  const off = engine.runtime.sql.onStatement((e) => {
    if (!BACKGROUND_LOOKS.has(e.name)) stmts.push(e.name);
  });
  const harness: Harness = {
    app: moduleRef,
    engine,
    events,
    statements: stmts,
    clear() {
      events.length = 0;
      stmts.length = 0;
    },
    eventsOf(name, id) {
      return events.filter(
        (e) => e.event === name && (id === undefined || e.metadata['id'] === id),
      );
    },
    waitFor(name, match = () => true, timeoutMs = 15_000) {
      const past = events.find((e) => e.event === name && match(e));
      if (past) return Promise.resolve(past);
      return new Promise<GenDurableEvent>((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`no ${name} event within ${timeoutMs} ms`));
        }, timeoutMs);
        const listener = (e: GenDurableEvent): void => {
          if (e.event === name && match(e)) {
            clearTimeout(timer);
            listeners.delete(listener);
            resolve(e);
          }
        };
        listeners.add(listener);
      });
    },
    /** Closes the app (idempotent). */
    async close() {
      if (!open) return;
      off();
      try {
        await moduleRef.close();
      } finally {
        subscription.unsubscribe();
        open = false;
      }
    },
  };
  return harness;
}

/**
 * Claims up to `batch` runnable rows of `queue` as `worker` through the production pick
 * (claim + enrichment), without a scheduler: for tests that drive the executor by hand on a
 * queue no scheduler serves.
 */
export function claimRows(
  engine: EngineService,
  queue: string,
  batch: number,
  worker: string,
): Promise<ClaimedRow[]> {
  return engine.runtime.picker.pick(queue, batch, worker);
}

/** Runs one claimed row through the production executor; resolves with the flusher's reply. */
export async function execute(engine: EngineService, row: ClaimedRow): Promise<string> {
  return (await engine.runtime.executor.execute(row)).reply;
}

/** A test-controlled latch per key: steps `wait(key)`, tests `open(key)` and `reached(key)`. */
export class Gates {
  private readonly opened = new Map<string, { promise: Promise<void>; open: () => void }>();
  private readonly arrivals = new Map<string, { promise: Promise<void>; arrive: () => void }>();

  private gate(key: string) {
    let g = this.opened.get(key);
    if (!g) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      g = { promise, open };
      this.opened.set(key, g);
    }
    return g;
  }

  private arrival(key: string) {
    let a = this.arrivals.get(key);
    if (!a) {
      let arrive!: () => void;
      const promise = new Promise<void>((resolve) => (arrive = resolve));
      a = { promise, arrive };
      this.arrivals.set(key, a);
    }
    return a;
  }

  /** Called by a step: marks arrival, then blocks until the test opens the gate. */
  wait(key: string): Promise<void> {
    this.arrival(key).arrive();
    return this.gate(key).promise;
  }

  /** Resolves once a step reached `key`. */
  reached(key: string): Promise<void> {
    return this.arrival(key).promise;
  }

  open(key: string): void {
    this.gate(key).open();
  }

  openAll(): void {
    for (const g of this.opened.values()) g.open();
  }
}

/** The raw row (snake_case columns). */
export async function rowOf(db: TestDatabase, id: string): Promise<Record<string, unknown>> {
  const { rows } = await db.pool.query(`SELECT * FROM gen_durable WHERE id = $1`, [id]);
  return rows[0] as Record<string, unknown>;
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes. */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
