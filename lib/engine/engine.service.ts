import { Injectable, type Type } from '@nestjs/common';
import type { PoolClient } from 'pg';
import type { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';

import { isArray } from '../util/is-array';
import type { Schedules } from '../cron/schedules';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { ResolvedOptions } from '../options/resolved-options';
import { INSERT_INSTANCE, INSERT_INSTANCES } from '../sql/insert.sql';
import { GET_INSTANCE_BY_ID, GET_INSTANCE_BY_KEY } from '../sql/instance.sql';
import type { GenDurableEvent } from '../telemetry/telemetry-events';
import { EngineHost } from './engine-host';
import type { EngineRuntime } from './engine-runtime';
import { InstanceQuery } from '../control/instance-query';
import { QueueControl } from '../control/queue-control';
import { resolveTarget, type Target } from '../control/target';
import type { InsertOptions } from '../fsm/insert-options.interface';
import { type InsertRow, withTraceContext } from '../instance/insert-row';
import { buildInsertRow } from '../instance/build-insert-row';
import type { AwaitResult, InstanceView } from '../instance/instance-view';
import type {
  CountOptions,
  InstanceCount,
  InstanceFilter,
  ListPage,
  ListResult,
} from '../control/instance-filter';
import type {
  CappedCount,
  PauseQueueResult,
  QueueStatus,
  ResumeQueueResult,
} from '../instance/queue-status';
import type { CancelOptions, CancelResult } from '../control/cancel-options';
import { cancelInstance } from '../control/cancel-instance';
import type { RetryOptions } from '../control/retry-options';
import { retryInstance } from '../control/retry-instance';
import { insertInstance } from '../control/insert-instance';
import { deliverSignal } from '../control/deliver-signal';
import type { BulkResult, CancelAllOptions, RetryAllOptions } from '../control/bulk-options';
import { BulkActions } from '../control/bulk-actions';
import type { ForkOptions } from '../control/fork-options';
import { forkInstance } from '../control/fork-instance';
import type { FsmGraph } from '../fsm/fsm-graph';
import type { StatsOverview, StatsOverviewOptions } from '../control/stats-overview';
import { readOverview } from '../control/read-stats-overview';
import type { Explanation } from '../control/explanation';
import { explainInstance } from '../control/instance-explain';
import type { LimiterStatus } from '../control/limiter-status';
import { readLimiterStatus } from '../control/read-limiter-status';
import { readStepCounts } from '../control/step-counts';
import { fsmGraphOf } from '../control/fsm-graph';
import { FsmNotRegisteredError } from '../errors/fsm-not-registered.error';
import type { HistoryEntry, HistoryPage } from '../instance/history-entry';
import { readInstanceHistory, resolveHistoryPage } from '../control/instance-history';
import { RedisLimiter } from '../limiter/redis.limiter';

/**
 * The engine's public API (docs/design.md §2.5): insert, signal, await, get, events$. Thin: it
 * validates input and delegates to the runtime. Nothing here needs a local scheduler, and
 * nothing here is a lifecycle hook (those are EngineLifecycle's).
 */
@Injectable()
export class EngineService {
  /** @internal built by Nest's injector; the published types leave the engine's internals out. */
  constructor(private readonly host: EngineHost) {}

  /** The engine name. */
  get name(): string {
    return this.host.name;
  }

  /** Telemetry events of this engine (hot, no replay; docs/design.md §20). */
  get events$(): Observable<GenDurableEvent> {
    return this.host.telemetry.events$;
  }

  /**
   * The runtime, for the testing and health entry points of this package.
   * @internal not part of the published types (stripInternal).
   */
  get runtime(): EngineRuntime {
    return this.host.runtime;
  }

  /** The validated options. */
  get options(): ResolvedOptions {
    return this.host.runtime.options;
  }

  /**
   * Cron schedules defined at run time beside the `@DurableCron` ones: `upsert`, `remove`,
   * `pause`, `resume`, `trigger`, `list`, `get` (docs/design.md §29).
   */
  get schedules(): Schedules {
    return this.host.runtime.schedules;
  }

  private get registry(): FsmRegistry {
    return this.host.registry;
  }

  /**
   * Inserts one instance; resolves with its id once committed. `DuplicateError` on an occupied
   * key. One statement — or, with `insertBatcher: { durable: true }` and no `manager`, a share of
   * one group-commit statement with concurrent callers (docs/design.md §26.11).
   */
  async insert(fsm: Type<unknown> | string, options?: InsertOptions): Promise<string> {
    const definition = this.registry.resolve(fsm);
    return this.traced('insert', definition.name, 1, async (traceContext) => {
      const row = withTraceContext(
        buildInsertRow(definition, options, this.runtime.options),
        traceContext,
      );
      const holder = options?.onConflict === 'return' && row.correlationKey !== null;
      const batcher = this.runtime.batcher;
      if (options?.manager === undefined && batcher?.takesDurable && !holder) {
        return batcher.insert(row);
      }
      const client = await this.clientOf(options?.manager);
      const answer = await insertInstance(this.runtime.sql, row, holder, client);
      if (answer.inserted && !options?.manager) this.pokeOrArm(answer, row);
      return answer.id;
    });
  }

  /**
   * Runs `run` inside the producer span `gen_durable <operation> <target>` when OpenTelemetry
   * is on (docs/design.md §31), handing it that span's W3C trace context to store with the row
   * or signal; otherwise (no `@opentelemetry/api`, `otel.enabled` false, no tracer provider)
   * runs it with null.
   */
  private traced<T>(
    operation: 'insert' | 'send',
    target: string,
    count: number,
    run: (traceContext: string | null) => Promise<T>,
  ): Promise<T> {
    const otel = this.runtime.otel;
    if (otel === undefined) return run(null);
    const attributes: Readonly<Record<string, string | number>> =
      operation === 'insert'
        ? { 'gen_durable.fsm': target, 'messaging.batch.message_count': count }
        : { 'gen_durable.signal': target };
    return otel.produce(operation, target, attributes, run);
  }

  /** After an insert committed: poke its queue if it is due, else arm a wake-up for when it is. */
  private pokeOrArm(inserted: { queue: string; due: boolean }, row: InsertRow): void {
    if (inserted.due) this.runtime.pokes.poke([inserted.queue]);
    else this.armWakeUp(row);
  }

  /**
   * A local wake-up for a row inserted to run later (docs/design.md §27.4): `scheduleIn` counts
   * on the database clock from the insert, as the timer does from its commit; an absolute
   * `scheduleAt` / `eligibleAt` is read on this node's clock (a node clock ahead of the
   * database's wakes the queue early, finds nothing due, and the poll runs the row).
   */
  private armWakeUp(row: InsertRow): void {
    const delay = row.at === null ? row.delayMs : row.at.getTime() - Date.now();
    this.runtime.wakeUps.arm(row.queue, delay);
  }

  /**
   * Lossy buffered insert (docs/design.md §6.5): validates the entry (typed errors, nothing buffered),
   * hands it to the insert batcher and resolves at once, without an id. Buffered rows die with
   * the process; a failed batch is dropped (`insert_batch:error`); a duplicate vanishes. At
   * `maxBuffer` pending, or with no live batcher, it inserts durably instead (one statement,
   * duplicate ignored). It cannot join a caller's transaction.
   */
  async insertAsync(fsm: Type<unknown> | string, options?: InsertOptions): Promise<void> {
    const definition = this.registry.resolve(fsm);
    if (options?.manager !== undefined) {
      throw new InvalidInputError(
        'insertAsync.manager',
        'insertAsync cannot join a transaction: use insert(fsm, { manager })',
      );
    }
    await this.traced('insert', definition.name, 1, async (traceContext) => {
      const row = withTraceContext(
        buildInsertRow(definition, options, this.runtime.options, 'insertAsync'),
        traceContext,
      );
      if (this.runtime.batcher?.offer(row)) return;
      const inserted = await INSERT_INSTANCE.run(this.runtime.sql, row);
      if (inserted) this.pokeOrArm(inserted, row);
    });
  }

  /**
   * Inserts many instances in one statement for any size; duplicates drop silently. Rows are
   * inserted ordered by correlation key, so ids do not map to entries by position.
   */
  async insertAll(
    fsm: Type<unknown> | string,
    entries: readonly InsertOptions[],
    options: { manager?: EntityManager } = {},
  ): Promise<string[]> {
    if (!isArray(entries)) throw new InvalidInputError('insertAll.entries', 'must be an array');
    if (entries.length === 0) return [];
    const definition = this.registry.resolve(fsm);
    return this.traced('insert', definition.name, entries.length, async (traceContext) => {
      const rows = entries.map((entry, i) => {
        if (entry?.manager !== undefined) {
          throw new InvalidInputError(
            `insertAll[${i}].manager`,
            'pass manager as the third argument of insertAll',
          );
        }
        return withTraceContext(
          buildInsertRow(definition, entry, this.runtime.options, `insertAll[${i}]`),
          traceContext,
        );
      });
      const client = await this.clientOf(options.manager);
      const inserted = await INSERT_INSTANCES.run(this.runtime.sql, { rows }, client);
      if (!options.manager) {
        this.runtime.pokes.poke(new Set(inserted.filter((r) => r.due).map((r) => r.queue)));
        if (inserted.some((r) => !r.due)) for (const row of rows) this.armWakeUp(row);
      }
      return inserted.map((r) => r.id);
    });
  }

  /**
   * Delivers a signal to a live instance in one statement (docs/design.md §8.1). Resolves once stored
   * (or recognised as a duplicate of `dedupKey` for the instance's life, also once it has
   * finished: a retry after a lost answer succeeds); `NoTargetError` when no live instance
   * answers otherwise. `manager` joins the caller's TypeORM transaction. A name listed in the
   * target FSM's `cancelOn` cancels the instance instead of being stored (docs/design.md §27.2).
   */
  async signal(
    target: Target,
    name: string,
    payload: unknown = {},
    options: { dedupKey?: string; manager?: EntityManager } = {},
  ): Promise<void> {
    const deliver = (traceContext: string | null): Promise<void> =>
      deliverSignal(
        this.runtime,
        target,
        name,
        payload,
        options.dedupKey,
        () => this.clientOf(options.manager),
        traceContext,
      );
    // A name that is not a string fails in deliverSignal, before any span.
    await (typeof name === 'string' && name.length > 0
      ? this.traced('send', name, 1, deliver)
      : deliver(null));
  }

  /**
   * The instance row, or null. `target`: an id, `{ id }` or `{ correlationKey }` (by key: the
   * live occupant wins, else the most recent ended instance with the key; docs/identity.md).
   */
  async get(target: Target): Promise<InstanceView | null> {
    const to = resolveTarget(target, 'get.target');
    return 'id' in to
      ? GET_INSTANCE_BY_ID.run(this.runtime.sql, { id: to.id })
      : GET_INSTANCE_BY_KEY.run(this.runtime.sql, { correlationKey: to.correlationKey });
  }

  /**
   * Waits until the instance settles (done, failed, or parked; `until: 'terminal'` = done or
   * failed) or `timeout` ms pass (`busy`: call again). Answers from the row (docs/design.md §9).
   * `target`: an id, `{ id }` or `{ correlationKey }` (looked up once as `get` does: the live
   * occupant, else the most recent ended instance with the key; `not_found` when none).
   */
  async await(
    target: Target,
    options: { timeout?: number; until?: 'settled' | 'terminal' } = {},
  ): Promise<AwaitResult> {
    const to = resolveTarget(target, 'await.target');
    const timeout = options.timeout ?? 5000;
    if (!Number.isInteger(timeout) || timeout < 0) {
      throw new InvalidInputError('await.timeout', 'must be an integer ≥ 0 (ms)');
    }
    const until = options.until ?? 'settled';
    if (until !== 'settled' && until !== 'terminal') {
      throw new InvalidInputError('await.until', "must be 'settled' or 'terminal'");
    }
    if ('id' in to) return this.runtime.watcher.await(to.id, timeout, until);
    const occupant = await this.get(to);
    if (occupant === null) return { kind: 'not_found' };
    return this.runtime.watcher.await(occupant.id, timeout, until);
  }

  /**
   * Instances matching `filter`, newest first, one keyset page (docs/design.md §27.7): pass
   * the answer's `next` as `page.after` for the next page (absent on the last). One statement
   * per page at any depth; each call examines at most `page.scanLimit` rows (default 10 000)
   * through the index its filter allows, so a page may come back short with a `next`.
   */
  list(filter: InstanceFilter = {}, page?: ListPage): Promise<ListResult> {
    return this.instanceQuery.list(filter, page);
  }

  /**
   * How many instances match `filter`, counted up to `cap` matches (default 10 000) through
   * the index its filter allows, within `budgetMs` (default 1 000); `capped: true` means there
   * are at least `count`, `exact: false` that the budget ran out first (`count` is a lower
   * bound). One statement.
   */
  count(filter: InstanceFilter = {}, options?: CountOptions): Promise<InstanceCount> {
    return this.instanceQuery.count(filter, options);
  }

  private get instanceQuery(): InstanceQuery {
    // On the read replica when the engine has one (`readDataSource`): list and count may lag.
    this.query ??= new InstanceQuery(this.runtime.reads);
    return this.query;
  }

  private query: InstanceQuery | undefined;

  /**
   * Pauses `queue` on every node (docs/design.md §27.6): each scheduler of it stops claiming
   * at its next claim or poll tick (within `pollInterval`; a poke sooner), releases the rows it
   * had buffered and lets running steps finish. Inserts and signals are still accepted. A
   * queue no node runs yet may be paused (`known: false` in the answer). Pausing a paused
   * queue keeps its `pausedAt` and replaces its reason if one is given. One statement.
   */
  pauseQueue(queue: string, options?: { reason?: string }): Promise<PauseQueueResult> {
    return this.queueControl.pause(queue, options);
  }

  /** Resumes a paused queue on every node (pokes it); `wasPaused: false` when it was not paused. One statement. */
  resumeQueue(queue: string): Promise<ResumeQueueResult> {
    return this.queueControl.resume(queue);
  }

  /**
   * Queues with their pause and counts capped at `cap` (default 10 000): this node's queues,
   * its FSMs' queues, every paused queue and every queue holding runnable rows — or only
   * `queue`. One statement (with JIT off, in one transaction), index-served.
   */
  queueStatus(queue?: string, options?: { cap?: number }): Promise<QueueStatus[]> {
    return this.queueControl.status(queue, options);
  }

  private get queueControl(): QueueControl {
    this.queues ??= new QueueControl(this.runtime);
    return this.queues;
  }

  private queues: QueueControl | undefined;

  /**
   * Cancels an instance (docs/design.md §27.2; docs/operations-control.md "Cancelling"). A live
   * row that is not executing is cancelled at once, in one statement with its riders: inbox
   * consumed, parent's join decremented, waiters answered `{ kind: 'cancelled', reason }`. An
   * executing row is asked to stop (`requested`): its owner's flush ends it `cancelled` unless
   * its step's terminal outcome commits first (`mode: 'fence'` cancels it at once instead).
   * `children` (default `cascade`) cancels every live descendant too. An ended row is answered
   * in `alreadyTerminal`, unchanged. `NoTargetError` when no instance answers the target.
   */
  async cancel(target: Target, options?: CancelOptions): Promise<CancelResult> {
    const to = resolveTarget(target, 'cancel.target');
    return cancelInstance(this.runtime, to, options);
  }

  /**
   * Runs a `failed` or `cancelled` instance again (docs/design.md §27.3; docs/operations-control.md
   * "Retrying"): runnable at its step (or `step`), with its state (or `state`, a value or a
   * function of the current one), due now (or `at`), `attempt` and `reaps` reset. A parent
   * still awaiting its children counts it again; one that moved on refuses the retry unless
   * `detach: true`. Typed errors, nothing changed: `NoTargetError`, `InvalidInputError` (a
   * live or done row, bad options, a throwing `state` function), `UnknownStepError`,
   * `DuplicateError` (its correlation key is occupied again).
   */
  async retry<S = Record<string, unknown>>(
    target: Target,
    options?: RetryOptions<S>,
  ): Promise<void> {
    const to = resolveTarget(target, 'retry.target');
    await retryInstance(this.runtime, to, options);
  }

  /**
   * Cancels every instance `filter` matches (docs/design.md §27.7; docs/operations-control.md
   * "Bulk actions"), each as `cancel` would with `options`: in batches of at most 1 000 rows,
   * each batch read by one keyset statement, then one cancel statement per row. `matched`
   * counts the rows the filter matched, `changed` those this call cancelled or asked to stop.
   * `dryRun: true` only counts. A filter with no criteria is refused unless `all: true`.
   * Resumable: after a crash, call it again.
   */
  cancelAll(filter: InstanceFilter, options?: CancelAllOptions): Promise<BulkResult> {
    return this.bulkActions.cancelAll(filter, options);
  }

  /**
   * Retries every `failed` or `cancelled` instance `filter` matches (docs/design.md §27.7), as
   * `retry` would with `step`, `at` and `detach`, in batches as `cancelAll`. `changed` counts
   * the rows retried; matched rows that cannot be retried (live, their parent moved on, their
   * key occupied, their version lacking `step`) are left alone. `dryRun: true` only counts.
   */
  retryAll(filter: InstanceFilter, options?: RetryAllOptions): Promise<BulkResult> {
    return this.bulkActions.retryAll(filter, options);
  }

  /**
   * Forks an instance (docs/design.md §28.3; docs/operations-control.md "Forking"): inserts a
   * new instance of the same FSM (its newest registered version, or the source's with
   * `version: 'same'`) at `step` (default: the source's current step) with `state` (a value or
   * a function of the source's state; default: the source's) or the state recorded in the
   * source's history row `fromHistory`; `forkedFrom` on the new row names the source, which is
   * untouched. Resolves with the new id once committed (one transaction: the insert and its
   * mark). Typed errors, nothing written: `NoTargetError`, `InvalidInputError`,
   * `UnknownStepError`, `FsmNotRegisteredError`.
   */
  async fork<S = Record<string, unknown>>(
    target: Target,
    options?: ForkOptions<S>,
  ): Promise<string> {
    const to = resolveTarget(target, 'fork.target');
    const source = 'id' in to ? `#${to.id}` : to.correlationKey;
    return this.traced('insert', source, 1, async (traceContext) => {
      const answer = await forkInstance(this.runtime, this.registry, to, options, traceContext);
      if (answer.due) this.runtime.pokes.poke([answer.queue]);
      return answer.id;
    });
  }

  private get bulkActions(): BulkActions {
    this.bulk ??= new BulkActions(this.runtime);
    return this.bulk;
  }

  private bulk: BulkActions | undefined;

  /**
   * An instance's step history, newest first (docs/design.md §28.1; docs/operations-control.md
   * "Step history"): at most `limit` rows (default 100, at most 1 000), older than the history
   * id `before` when given (pass the last `id` of a page for the next). What is recorded
   * depends on the FSM's `history` level. One statement, on the read replica when the engine
   * has one (`readDataSource`; it may lag). `NoTargetError` when no instance answers the target
   * (there); `InvalidInputError` for bad options.
   */
  async history(target: Target, options?: HistoryPage): Promise<HistoryEntry[]> {
    const to = resolveTarget(target, 'history.target');
    return readInstanceHistory(
      this.runtime.reads,
      to,
      resolveHistoryPage(options, 'history.options'),
    );
  }

  /**
   * "Why isn't it running?" (docs/design.md §30; docs/dashboard-data.md): every reason that
   * applies to the instance, blocking ones first, each with a machine `code`, a sentence and
   * its facts — not yet eligible (until when), awaited signal names vs the inbox, children
   * pending, its K = 1 key's holder, a full gate (holders / limit), an empty rate bucket (until
   * when), an expired lease, a paused queue, an FSM version or queue this node does not run, an
   * ended row (with its error or cancel reason), or running now (owner, lease). One statement.
   * `NoTargetError` when no instance answers `target`.
   */
  explain(target: Target): Promise<Explanation> {
    const to = resolveTarget(target, 'explain.target');
    const runtime = this.runtime;
    return explainInstance(runtime.sql, to, {
      registered: (fsm, version) => runtime.registry.find(fsm, version) !== undefined,
      serves: (queue) => runtime.schedulers.has(queue),
      limiter: runtime.options.limiter === 'postgres' ? 'postgres' : 'redis',
    });
  }

  /**
   * The limiters view (docs/design.md §30; docs/dashboard-data.md): the configured gates and
   * rate limits, and live per key — gates: holders / limit over their shards; rate buckets:
   * tokens available now, capacity, refill per second — from the PostgreSQL limiter's counters,
   * at most `cap` counter rows read (default 1 000; `truncated` says more exist). With the
   * Redis limiter the same from Redis (SCAN of its gate and bucket keys, at most `cap` of each;
   * `unreadable` when Redis cannot be read). Two statements.
   */
  limiterStatus(options?: { cap?: number }): Promise<LimiterStatus> {
    const backend = this.runtime.options.limiter === 'postgres' ? 'postgres' : 'redis';
    const limiter = this.runtime.limiter;
    const redis =
      limiter instanceof RedisLimiter ? (cap: number) => limiter.counters(cap) : undefined;
    return readLimiterStatus(this.runtime.sql, backend, options, redis);
  }

  /**
   * The dashboard's overview (docs/design.md §30; docs/dashboard-data.md): per queue the newest
   * once-a-minute snapshot's capped counts by status, the oldest due row, and a sparkline of
   * rows done / failed / cancelled per minute over the last `minutes` (default 60). With no
   * snapshot stored yet (`source: 'live'`), live capped counts of runnable, scheduled and
   * executing rows. Index-served reads of gen_durable_stats, whatever the table size.
   */
  stats(options?: StatsOverviewOptions): Promise<StatsOverview> {
    const queues = new Set([
      ...Object.keys(this.runtime.options.queues),
      ...this.registry.all().map((d) => d.queue),
    ]);
    return readOverview(this.runtime.reads, options, [...queues]);
  }

  /**
   * The state graph of a registered FSM (its newest version, or `version`) from decorator
   * metadata (docs/design.md §30; docs/dashboard-data.md): steps with their declared
   * `@Step({ next })` (null = undeclared) and timeouts, the edges, and `mermaid`, the same
   * graph as Mermaid `stateDiagram-v2` text. `FsmNotRegisteredError` for an FSM (or version)
   * this node does not register. No statement.
   */
  graph(fsm: Type<unknown> | string, version?: number): FsmGraph {
    const newest = this.registry.resolve(fsm);
    if (version === undefined || version === newest.version) return fsmGraphOf(newest);
    const found = this.registry.find(newest.name, version);
    if (!found) throw new FsmNotRegisteredError(newest.name, version);
    return fsmGraphOf(found);
  }

  /**
   * Live instances (not ended) per step of an FSM's newest registered version, for its graph
   * (docs/design.md §30; `renderFsmGraphSvg(graph, counts)`): one capped `count` per step
   * (default cap 10 000; `capped: true` = at least that many). `FsmNotRegisteredError` for an
   * FSM this node does not register.
   */
  stepCounts(
    fsm: Type<unknown> | string,
    options?: { cap?: number },
  ): Promise<Record<string, CappedCount>> {
    const graph = this.graph(fsm);
    return readStepCounts(
      this.runtime.reads,
      graph.fsm,
      graph.steps.map((s) => s.name),
      options?.cap,
    );
  }

  private async clientOf(manager: EntityManager | undefined): Promise<PoolClient | undefined> {
    if (manager === undefined) return undefined;
    const runner = manager.queryRunner;
    if (!runner || !runner.isTransactionActive) {
      throw new InvalidInputError(
        'manager',
        'must be the EntityManager of an active TypeORM transaction (dataSource.transaction(manager => …))',
      );
    }
    return (await runner.connect()) as PoolClient;
  }
}
