import { retryWhileUnreachable } from '../db/retry-while-unreachable';
import { Logger } from '@nestjs/common';
import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';

import { SqlExecutor, transactionTimeouts } from '../db/sql-executor';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { SchemaVersionError } from '../errors/schema-version.error';
import { OPTION_TABLE } from '../options/option-table';
import type { ResolvedOptions } from '../options/resolved-options';
import { CURRENT_SCHEMA_VERSION } from '../schema/increments';
import { readIndexBuilds } from '../schema/index-builds';
import { READ_SCHEMA_VERSION, SHOW_SYNCHRONOUS_COMMIT } from '../sql/schema.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { AwaitWatcher } from '../runtime/await-watcher';
import { Executor } from '../runtime/executor';
import { dueInMs } from '../runtime/flush-entry';
import { type FlushEffects, Flusher } from '../runtime/flusher';
import { GarbageCollector } from '../runtime/gc';
import { closeThrottledLimits } from '../runtime/limit-throttles';
import { StatsSnapshot } from '../runtime/stats-snapshot';
import { CronTicker } from '../cron/cron-ticker';
import { ScheduleFirer } from '../cron/schedule-firer';
import { Schedules } from '../cron/schedules';
import { syncDeclaredSchedules } from '../cron/schedule-sync';
import { Picker } from '../runtime/picker';
import { createLimiter, limitConfigs } from '../limiter/create-limiter';
import { RedisNamespace } from '../db/engine-namespace';
import type { Limiter, LimiterSlot } from '../limiter/limiter.interface';
import { createPokeTransport } from '../poke/create-poke-transport';
import { WakeUps } from '../runtime/wake-ups';
import type { RetentionOverride } from '../fsm/retention';
import type { InsertRow } from '../instance/insert-row';
import { DurableEvents } from '../runtime/durable-events';
import type { DurableEventHandler } from '../discovery/durable-event.explorer';
import { fireAwaitDeadlines } from '../runtime/await-deadlines';
import { fireInstanceDeadlines } from '../control/instance-deadline';
import { OUTCOME_KINDS } from '../fsm/outcome-kinds';
import type { PokeTransport } from '../poke/poke-transport.interface';
import {
  type InsertClaim,
  InsertBatcher,
  type InsertBatcherConfig,
} from '../runtime/insert-batcher';
import { StreamBatcher } from '../runtime/stream-batcher';
import { StreamWatcher } from '../runtime/stream-watcher';
import { PokeEmitter } from '../runtime/poke-emitter';
import { Reaper } from '../runtime/reaper';
import { RunAhead } from '../runtime/run-ahead';
import { TransactionalSteps } from '../runtime/transactional-step';
import { transactionalPoolWarning } from '../runtime/transactional-pool';
import { buildScheduler } from '../runtime/build-scheduler';
import { NodeLivenessLock } from '../runtime/node-liveness-lock';
import { PriorityAging } from '../runtime/priority-aging';
import { listenerClientClassOf, listenerConnectionOf } from '../poke/postgres.poke-transport';
import type { Scheduler } from '../runtime/scheduler';
import { StepLauncher } from '../runtime/step-launcher';
import { SoloRun } from '../runtime/solo-run';
import { StallDetector } from '../runtime/stall-detector';
import { Otel } from '../telemetry/otel';
import type { ControlNode } from '../control/control-runtime';
import { engineControlNode } from './engine-control-node';
import { LATEST_QUEUE_STATS } from '../sql/queue-gauges.sql';

/** The least time a flusher waits before it answers an unanswered outcome `error`. */
const MIN_FLUSH_ANSWER_TIMEOUT_MS = 30_000;

/** The pg pool under a TypeORM PostgreSQL DataSource (its master pool). */
export function poolOf(dataSource: DataSource): Pool {
  const pool = (dataSource.driver as unknown as { master?: Pool }).master;
  if (!pool) {
    throw new Error(
      'the TypeORM DataSource is not initialized (no pg pool): initialize it before the engine boots',
    );
  }
  return pool;
}

/**
 * Everything one engine runs: SQL executor, flushers, executor, schedulers, reaper, GC,
 * await watcher, stream writer and watcher, poke emitter, stall detector. Built at module init, started at bootstrap,
 * drained and released at shutdown (docs/design.md §2.1, §17.4).
 */
export class EngineRuntime {
  readonly sql: SqlExecutor;
  /**
   * Reads that tolerate lag (`list`, `count`, `history`, `queueStatus`, the health depth read):
   * an executor on `readDataSource`'s pool when one is set, else `sql` (docs/operations.md
   * "Read replicas"). Nothing that claims, writes, signals or answers `get`/`await` runs here.
   */
  readonly reads: SqlExecutor;
  readonly flushers: Flusher[];
  readonly executor: Executor;
  readonly picker: Picker;
  /** Gates and rate limits: the PostgreSQL or Redis backend (docs/design.md §16). */
  readonly limiter: Limiter;
  readonly schedulers = new Map<string, Scheduler>();
  readonly watcher: AwaitWatcher;
  readonly pokes: PokeEmitter;
  /** The cross-node poke leg (`'postgres'` or `{ redis }`), else undefined (docs/design.md §16.4). */
  readonly pokeTransport: PokeTransport | undefined;
  /** The node's liveness lock (docs/design.md §17.3), on a node that runs queues. */
  private livenessLock: NodeLivenessLock | undefined;
  /** Local wake-ups of rows this node committed with a short delay (docs/design.md §27.4). */
  readonly wakeUps: WakeUps;
  /** `@OnDurableEvent` listeners and `finished$` (docs/events.md). */
  readonly durableEvents: DurableEvents;
  /** Local timers for the await timeouts this node parked (docs/design.md §8.5). */
  readonly awaitDeadlines: WakeUps;
  /**
   * Local timers for the instance deadlines this node inserted, and their graces
   * (docs/operations-control.md "Instance deadlines"); one key, as `awaitDeadlines`.
   */
  readonly instanceDeadlines: WakeUps;
  /**
   * Group-commit inserts (docs/design.md §26.11), on by default, and the `insertAsync` buffer
   * (§6.5) when `insertBatcher` is set.
   */
  readonly batcher: InsertBatcher;
  /** Group commit of `ctx.stream(name).write` (docs/streams.md). */
  readonly streamWriter: StreamBatcher;
  /** Stream readers' waits on this node (docs/streams.md): instance control's `streamWaiter`. */
  readonly streamWaiter: StreamWatcher;
  readonly stall: StallDetector;
  /** The node's solo run of poison-pill suspects, shared by its schedulers (docs/design.md §26.5). */
  readonly solo: SoloRun;
  reaper: Reaper | undefined;
  gc: GarbageCollector | undefined;
  /** Priority aging (docs/operations.md "Priority aging"), on a GC node when configured. */
  priorityAging: PriorityAging | undefined;
  /** The once-a-minute stats snapshot, on a maintenance node (docs/design.md §30). */
  stats: StatsSnapshot | undefined;
  /** One tick over the schedule table; testing's `fireSchedules(at)` calls it too (docs/design.md §29). */
  readonly firer: ScheduleFirer;
  /** `engine.schedules` (docs/design.md §29). */
  readonly schedules: Schedules;
  /** The schedule ticker, on a node with schedules that runs queues or maintenance. */
  ticker: CronTicker | undefined;
  /**
   * OpenTelemetry spans and metrics (docs/design.md §31), or undefined: `otel.enabled` false or
   * `@opentelemetry/api` not installed.
   */
  readonly otel: Otel | undefined;
  /** What only an engine knows, for instance control (docs/design.md §32). */
  readonly node: ControlNode;
  private readonly logger = new Logger('GenDurable');
  /** When boot stops retrying unreachable-database errors (set by `start`). */
  private bootDeadline = 0;
  private drained: Promise<void> | undefined;

  constructor(
    readonly options: ResolvedOptions,
    readonly registry: FsmRegistry,
    readonly telemetry: Telemetry,
    eventHandlers: readonly DurableEventHandler[] = [],
  ) {
    const executorOptions = {
      schema: options.schema,
      preparedStatements: options.preparedStatements,
      statementTimeoutMs: options.statementTimeout,
      ...transactionTimeouts(options.leaseTtl, options.statementTimeout),
    };
    this.sql = new SqlExecutor(poolOf(options.dataSource), executorOptions);
    this.reads = options.readDataSource
      ? new SqlExecutor(poolOf(options.readDataSource), executorOptions)
      : this.sql;
    this.watcher = new AwaitWatcher(this.sql, options.await.tick);
    this.streamWaiter = new StreamWatcher(this.sql, options.await.tick);
    this.streamWriter = new StreamBatcher(
      this.sql,
      telemetry,
      (streams) => this.streamWaiter.appended(streams),
      options.leaseTtl / 2,
    );
    const namespace = new RedisNamespace(this.sql, options.name, options.redisPrefix);
    this.pokeTransport = createPokeTransport(options, this.sql, namespace);
    const transport = this.pokeTransport;
    this.pokes = new PokeEmitter(
      options.poke !== 'none',
      (queue) => this.schedulers.get(queue)?.poke(),
      transport ? (queue) => transport.publish(queue) : undefined,
    );
    this.wakeUps = new WakeUps(options.maxPollInterval * 10, (queue) => this.pokes.poke([queue]));
    this.durableEvents = new DurableEvents(
      eventHandlers,
      options.announceFinished && transport
        ? (ended) => transport.publishFinished(ended)
        : undefined,
    );
    // Await timeouts this node parked, fired on time by a local timer (one key: the statement
    // fires every overdue row); the reaper's sweep stays the floor (docs/design.md §8.5).
    this.awaitDeadlines = new WakeUps(options.maxPollInterval * 10, () => {
      void fireAwaitDeadlines(this.sql, this.telemetry, (queues) => this.pokes.poke(queues)).catch(
        (err: unknown) =>
          this.logger.warn(`await deadline timer: ${String(err)} (the reaper fires it)`),
      );
    });
    // Instance deadlines this node inserted (and their graces), fired on time by a local timer;
    // the reaper's sweep stays the floor (docs/operations-control.md "Instance deadlines").
    this.instanceDeadlines = new WakeUps(options.maxPollInterval * 10, () => {
      void this.fireDeadlines().catch((err: unknown) =>
        this.logger.warn(`instance deadline timer: ${String(err)} (the reaper fires it)`),
      );
    });
    this.batcher = new InsertBatcher(
      this.sql,
      insertBatcherConfig(options.insertBatcher),
      telemetry,
      (rows) => this.insertedDue(rows),
      (row) => this.claimInserted(row),
    );
    this.flushers = options.flushers.map(
      (config) =>
        new Flusher(
          this.sql,
          config,
          telemetry,
          (effects) => this.afterCommit(effects),
          options.leaseTtl / 2,
          // An answer is owed once the retries (half the lease) and one more attempt's checkout
          // and statement are over; 30 s at least.
          Math.max(
            MIN_FLUSH_ANSWER_TIMEOUT_MS,
            options.leaseTtl / 2 + 2 * options.statementTimeout,
          ),
        ),
    );
    this.limiter = createLimiter(options, this.sql, telemetry, namespace);
    this.node = engineControlNode(registry, options, this.limiter, this.schedulers);
    this.picker = new Picker(this.sql, options, telemetry, this.limiter);
    this.stall = new StallDetector(options.heartbeatInterval, telemetry);
    this.otel = Otel.create(options.otel, telemetry, () => LATEST_QUEUE_STATS.run(this.sql));
    const runAhead = new RunAhead(
      options,
      telemetry,
      this.limiter,
      (rows) => this.picker.enrich(rows),
      (entry) => this.executor.commit(entry),
    );
    this.executor = new Executor(
      registry,
      options,
      telemetry,
      (queue) => this.flusherFor(queue),
      runAhead,
      this.otel?.stepTracer,
      (queue) => this.schedulers.get(queue)?.lease.progressPending(),
      new TransactionalSteps(
        options.dataSource,
        this.sql,
        (queue) => this.flusherFor(queue),
        options.leaseTtl,
      ),
      this.streamWriter,
    );
    this.solo = new SoloRun(options.leaseTtl);
    this.firer = new ScheduleFirer(
      this.sql,
      registry,
      {
        grace: options.schedules ? options.schedules.grace : 0,
        maxStateBytes: options.maxStateBytes,
      },
      telemetry,
      (queues) => this.pokes.poke(queues),
    );
    this.schedules = new Schedules(
      this.sql,
      registry,
      options.maxStateBytes,
      () => this.ticker?.nudge(),
      (queues) => this.pokes.poke(queues),
    );
  }

  flusherFor(queue: string): Flusher {
    // Asked once per step: a loop, not find() and its closure.
    for (const f of this.flushers) {
      if (f.config.queues === 'all' || f.config.queues.includes(queue)) return f;
    }
    // Every local queue is covered (validated); a non-local queue (testing drain) uses the first.
    return this.flushers[0] as Flusher;
  }

  /** After a flush committed (docs/design.md §6.4): credit held slots, nudge awaiters, poke woken queues. */
  afterCommit(effects: FlushEffects): void {
    // A loop, not flatMap: that made an array per committed entry.
    const slots: LimiterSlot[] = [];
    for (const e of effects.committed) if (e.slot) slots.push(e.slot);
    // Best-effort and never throws: a lost credit is a leaked slot the GC reconcile repairs.
    if (slots.length > 0) void this.limiter.credit(slots);
    closeThrottledLimits(effects, this.limiter, this.telemetry);
    if (effects.settledIds.length > 0) {
      this.watcher.nudge(effects.settledIds);
      // A stream's readers end with its instance (docs/streams.md).
      this.streamWaiter.nudgeInstances(effects.settledIds);
    }
    if (effects.pokeQueues.size > 0) this.pokes.poke(effects.pokeQueues);
    this.durableEvents.committed(effects.committed, effects.cancelledIds);
    // A row made runnable later (a retry backoff, a sleep) wakes its queue when it is due.
    for (const e of effects.committed) {
      if ('delayMs' in e && OUTCOME_KINDS[e.kind].pokes === 'whenDue') {
        const dueIn = dueInMs(e);
        if (dueIn > 0) this.wakeUps.arm(e.queue, dueIn);
      }
      if (e.kind === 'await' && e.timeoutMs !== null) this.awaitDeadlines.arm('', e.timeoutMs);
      if (e.kind === 'scheduleChildren') for (const child of e.children) this.armDeadline(child);
    }
  }

  /**
   * One idempotent boot statement (or group), retried while the database is unreachable for up
   * to `bootTimeout` in all (docs/operations.md, "Boot"); any other error fails boot at once.
   */
  private onBoot<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return retryWhileUnreachable(what, fn, {
      timeoutMs: Math.max(0, this.bootDeadline - Date.now()),
      onRetry: (step, err, elapsedMs) =>
        this.logger.warn(
          `boot: ${step} could not reach the database (${String(err)}); retrying (${elapsedMs} ms so far, bootTimeout ${this.options.bootTimeout} ms)`,
        ),
    });
  }

  /**
   * Fires the due instance deadlines (the reaper's sweep, the local timers); how many it acted
   * on. A firing that stopped at its page bound with more due arms the local timer for the next
   * one at once, so a backlog is worked off by consecutive firings, not one per reaper interval
   * (docs/operations-control.md "Instance deadlines").
   */
  async fireDeadlines(): Promise<number> {
    const fired = await fireInstanceDeadlines(this, this.options.leaseTtl);
    if (fired.more) this.instanceDeadlines.arm('', 1);
    return fired.cancelled + fired.requested + fired.routed;
  }

  /**
   * Rows inserted on this node committed runnable and due: each queue's local scheduler lowers
   * its claim floor to the row's place when it stands before the floor (a more urgent priority,
   * a past `runAt`; docs/design.md §5.3.1), then the queues are poked. The floor goes back
   * before the poke's claim starts, so that claim finds the row instead of waiting for a look
   * behind the floor.
   */
  insertedDue(rows: readonly Pick<InsertRow, 'queue' | 'priority' | 'at'>[]): void {
    const queues = new Set<string>();
    for (const row of rows) {
      this.schedulers.get(row.queue)?.insertedDue(row.priority, row.at);
      queues.add(row.queue);
    }
    this.pokes.poke(queues);
  }

  /**
   * A slot for a lone awaited insert of `row` to be written claimed by this node (docs/design.md
   * §5.5.1 "Inserted claimed"), or undefined: only with pokes on (`poke: 'none'` leaves every
   * insert to the poll), for a row the claim would take at once and run without admission (due
   * now, not held, no concurrency key, rate limit, fairness or sequence key), and when its
   * queue's scheduler here has a slot free and nothing waiting ({@link Scheduler.reserveInserted}).
   */
  private claimInserted(row: InsertRow): InsertClaim | undefined {
    if (this.options.poke === 'none' || row.held === true || row.at !== null) return undefined;
    if (row.delayMs > 0) return undefined;
    if (row.concurrencyKey !== null || row.rateLimit !== null) return undefined;
    if (row.fairnessKey != null || row.sequenceKey != null) return undefined;
    const scheduler = this.schedulers.get(row.queue);
    if (!scheduler?.reserveInserted()) return undefined;
    return {
      worker: scheduler.workerId,
      leaseMs: this.options.leaseTtl,
      take: (claimed) => scheduler.takeInserted(claimed),
      cancel: () => scheduler.cancelInserted(),
    };
  }

  /**
   * Arms the local timers of `row`'s instance deadline, if it has one (docs/operations-control.md
   * "Instance deadlines"): at the deadline and when its FSM's grace for an executing row (default
   * `leaseTtl`) ends. `deadlineInMs` counts on the database clock from the insert, as the timer
   * does from its commit; an absolute `deadline` is read on this node's clock (a timer that
   * fires early finds nothing due). Beyond the horizon the reaper's sweep fires it.
   */
  armDeadline(row: Pick<InsertRow, 'fsm' | 'deadlineAt' | 'deadlineInMs'>): void {
    const delayMs =
      row.deadlineAt != null
        ? row.deadlineAt.getTime() - Date.now()
        : row.deadlineInMs != null
          ? row.deadlineInMs
          : null;
    if (delayMs === null) return;
    const graceMs =
      this.registry.all().find((d) => d.name === row.fsm)?.deadline?.graceMs ??
      this.options.leaseTtl;
    this.instanceDeadlines.arm('', Math.max(1, delayMs));
    this.instanceDeadlines.arm('', Math.max(1, delayMs) + graceMs + 1);
  }

  /** Instance control's wait for after-commit effects: an engine's run in-process, so none is pending. */
  settle(): Promise<void> {
    return Promise.resolve();
  }

  async start(): Promise<void> {
    this.bootDeadline = Date.now() + this.options.bootTimeout;
    // An FSM that declares a default fairness key makes its queue's claims fair from the first.
    this.picker.declareFair(
      this.registry
        .all()
        .filter((d) => d.fairnessKey !== undefined)
        .map((d) => d.queue),
    );
    const installed = await this.onBoot('schema check', () =>
      READ_SCHEMA_VERSION.run(this.sql, { schema: this.options.schema }),
    );
    if (installed !== CURRENT_SCHEMA_VERSION) {
      throw new SchemaVersionError(this.options.schema, installed, CURRENT_SCHEMA_VERSION);
    }
    const indexes = await this.onBoot('index build check', () =>
      readIndexBuilds(this.sql, this.options.schema, installed),
    );
    for (const index of indexes.filter((i) => i.state !== 'valid')) {
      const message = `index ${index.name} of schema "${this.options.schema}" is ${index.state}: an online build did not finish (run the migration again to build it; docs/schema.md "Online index builds")`;
      this.logger.warn(message);
      this.telemetry.emit('boot:warning', { count: 1 }, { warning: message });
    }
    const sync = await this.onBoot('synchronous_commit check', () =>
      SHOW_SYNCHRONOUS_COMMIT.run(this.sql),
    );
    if (sync === 'off') {
      const message =
        'synchronous_commit is off: acknowledged inserts and signals are not durable until WAL is flushed';
      this.logger.warn(message);
      this.telemetry.emit('boot:warning', { count: 1 }, { warning: message });
    }
    if (
      Object.keys(this.options.queues).length > 0 &&
      this.options.reaper === false &&
      this.options.poke === 'local'
    ) {
      const message = `this node runs queues with poke 'local' and no reaper: make sure another node runs a reaper (and use a cross-node poke)`;
      this.logger.warn(message);
      this.telemetry.emit('boot:warning', { count: 1 }, { warning: message });
    }
    const poolWarning = transactionalPoolWarning(
      this.registry.all(),
      this.options.queues,
      this.sql.pool.options.max ?? DEFAULT_POOL_MAX,
    );
    for (const message of [
      ...unservedQueueWarnings(this.registry, this.options.queues),
      ...(poolWarning === undefined ? [] : [poolWarning]),
    ]) {
      this.logger.warn(message);
      this.telemetry.emit('boot:warning', { count: 1 }, { warning: message });
    }
    this.stall.start();
    this.otel?.start();
    // Order of docs/design.md §2.1: watcher, poke, limiter, reaper, GC, flushers, batcher, schedulers.
    await this.pokeTransport?.start({
      poke: (queue) => this.schedulers.get(queue)?.poke(),
      resync: () => {
        for (const scheduler of this.schedulers.values()) scheduler.poke();
      },
      finished: (ended) => this.durableEvents.heard(ended),
      degraded: (message) =>
        this.telemetry.emit('boot:warning', { count: 1 }, { warning: message }),
    });
    // Seeds this node's own limit declarations (docs/design.md §16.1) and connects a Redis limiter.
    await this.onBoot('limit seeding', () => this.limiter.syncConfig(limitConfigs(this.options)));
    if (this.options.reaper) {
      this.reaper = new Reaper(
        this.sql,
        this.options.reaper.interval,
        this.options.reaper.maxReaps,
        this.telemetry,
        (queues) => this.pokes.poke(queues),
        (ids) => this.watcher.nudge(ids),
        this.options.leaseTtl,
        {
          off: this.registry
            .all()
            .filter((d) => d.history === 'off')
            .map((d) => d.name),
          full: this.registry
            .all()
            .filter((d) => d.history === 'full')
            .map((d) => d.name),
        },
        (row, message) => this.durableEvents.failed(row, message),
        () => this.fireDeadlines(),
      );
      this.reaper.start();
    }
    if (this.options.gc) {
      this.gc = new GarbageCollector(
        this.sql,
        this.options.gc,
        this.telemetry,
        this.limiter,
        retentionOverrides(this.registry),
      );
      this.gc.start();
      if (this.options.priorityAging) {
        this.priorityAging = new PriorityAging(
          this.sql,
          this.options.priorityAging,
          this.telemetry,
        );
        this.priorityAging.start();
      }
    }
    if (this.options.stats && (this.options.reaper !== false || this.options.gc !== false)) {
      this.stats = new StatsSnapshot(this.sql, this.options.stats, this.telemetry);
      this.stats.start();
    }
    this.batcher.start();
    if (Object.keys(this.options.queues).length > 0) {
      // docs/design.md §17.3: the proof that earlier processes with this nodeId are gone.
      const lock = new NodeLivenessLock({
        key: `${this.options.schema}:${this.options.name}:${this.options.nodeId}`,
        connection: listenerConnectionOf(
          this.sql.pool,
          `gen_durable:${this.options.name}:node-lock`,
        ),
        clientClass: listenerClientClassOf(this.sql.pool),
        pingIntervalMs: this.options.heartbeatInterval,
        statementTimeoutMs: this.options.statementTimeout,
        onAcquiredLater: () => {
          for (const scheduler of this.schedulers.values()) {
            void scheduler.lease.reclaimLater().then(() => scheduler.poke());
          }
        },
      });
      this.livenessLock = lock;
      if ((await lock.acquire()) === 'taken') {
        this.telemetry.emit(
          'boot:warning',
          { count: 1 },
          {
            warning: `another live process holds nodeId ${this.options.nodeId}: startup reclaim falls back to the lease`,
          },
        );
      }
    }
    const livenessLock = this.livenessLock;
    const shared = {
      sql: this.sql,
      options: this.options,
      executor: this.executor,
      launcher: new StepLauncher(this.sql, this.executor),
      picker: this.picker,
      telemetry: this.telemetry,
      solo: this.solo,
      predecessorGone: () => livenessLock?.held === true,
      onReleased: (released: string) => this.pokes.poke([released]),
    };
    for (const [queue, concurrency] of Object.entries(this.options.queues)) {
      this.schedulers.set(queue, buildScheduler(shared, queue, concurrency));
    }
    await Promise.all([...this.schedulers.values()].map((s) => s.start()));
    if (this.reaper) {
      const reaper = this.reaper;
      await this.onBoot('boot sweep', () => reaper.sweepNow());
    }
    await this.startSchedules();
  }

  /**
   * Boot upsert of the declared schedules, then (on a node that runs queues or maintenance)
   * the ticker, whose first tick fires what is due before boot completes (docs/design.md §29).
   */
  private async startSchedules(): Promise<void> {
    const config = this.options.schedules;
    if (!config) return;
    await this.onBoot('schedule seeding', () =>
      syncDeclaredSchedules(this.sql, this.registry, config.prune),
    );
    const maintains = this.options.reaper !== false || this.options.gc !== false;
    if (Object.keys(this.options.queues).length === 0 && !maintains) return;
    this.ticker = new CronTicker(this.firer, config.interval);
    await this.ticker.start();
  }

  /** Stop claiming, release buffers, wait for in-flight steps, flush (docs/design.md §17.4). Idempotent. */
  drain(): Promise<void> {
    this.drained ??= (async () => {
      // Stream readers stop now (NotAvailableError, not an end): an SSE response they feed
      // ends, so the host's HTTP server, closed before the engine, is not held open by it.
      this.streamWaiter.close();
      // The ticker stops firing as the schedulers stop claiming (both at once: liveness reads
      // the schedulers' draining status right after drain() is called).
      await Promise.all([
        this.ticker?.stop(),
        ...[...this.schedulers.values()].map((s) => s.drain()),
      ]);
      // A step's writes settle before its outcome: nothing is left here once the steps ended.
      await this.streamWriter.drain();
      await Promise.all(this.flushers.map((f) => f.drain()));
      await this.batcher.drain();
      await this.reaper?.stop();
      await this.gc?.stop();
      await this.priorityAging?.stop();
      await this.stats?.stop();
    })();
    return this.drained;
  }

  /** Releases timers and waiters after the drain. */
  async close(): Promise<void> {
    await this.drain();
    await this.livenessLock?.close();
    await this.pokeTransport?.close();
    this.wakeUps.close();
    this.awaitDeadlines.close();
    this.instanceDeadlines.close();
    this.pokes.close();
    await this.limiter.close();
    this.watcher.close();
    this.stall.stop();
    this.otel?.close();
    this.durableEvents.complete();
  }
}

/** One warning per queue of a registered FSM that this node, which runs queues, does not run. */
/** node-postgres' default pool size (`max`), when the DataSource set none. */
const DEFAULT_POOL_MAX = 10;

function unservedQueueWarnings(
  registry: FsmRegistry,
  queues: Readonly<Record<string, number>>,
): string[] {
  if (Object.keys(queues).length === 0) return [];
  return [...registry.queuesOutside(Object.keys(queues))].map(
    ([queue, names]) =>
      `queue "${queue}" of ${names.map((n) => `FSM "${n}"`).join(', ')} is not run by this node (its queues: ${Object.keys(queues).join(', ')}): its rows wait until some node runs it`,
  );
}

/**
 * The FSMs registered here whose `@DurableFsm({ retention })` overrides a status, newest version's
 * declaration per name (the GC keys overrides by FSM name).
 */
function retentionOverrides(
  registry: FsmRegistry,
): { readonly fsm: string; readonly retention: RetentionOverride }[] {
  const byName = new Map<string, { version: number; retention: RetentionOverride }>();
  for (const d of registry.all()) {
    if (Object.keys(d.retention).length === 0) continue;
    const seen = byName.get(d.name);
    if (!seen || seen.version < d.version) {
      byName.set(d.name, { version: d.version, retention: d.retention });
    }
  }
  return [...byName].map(([fsm, { retention }]) => ({ fsm, retention }));
}

/**
 * The batcher's lanes from the `insertBatcher` option (docs/performance.md "Group-commit
 * inserts"): given, both as configured; off (the default), no `insertAsync` buffer, and awaited
 * inserts group-committed with the section's defaults.
 */
function insertBatcherConfig(given: ResolvedOptions['insertBatcher']): InsertBatcherConfig {
  const lanes = given || OPTION_TABLE.insertBatcher.resolve({}, 'insertBatcher', 'insertBatcher');
  if (lanes === false) throw new Error('gen-durable bug: insertBatcher defaults resolved to off');
  return { ...lanes, buffered: given !== false };
}
