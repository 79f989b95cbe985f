import { Injectable, type Type } from '@nestjs/common';
import type { PoolClient } from 'pg';
import type { Observable } from 'rxjs';
import type { EntityManager } from 'typeorm';

import { isArray } from '../util/is-array';
import type { Schedules } from '../cron/schedules';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { DuplicateError } from '../errors/duplicate.error';
import { NoTargetError } from '../errors/no-target.error';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { ResolvedOptions } from '../options/resolved-options';
import { INSERT_INSTANCE, INSERT_INSTANCE_OR_HOLDER, INSERT_INSTANCES } from '../sql/insert.sql';
import { GET_INSTANCE_BY_ID, GET_INSTANCE_BY_KEY } from '../sql/instance.sql';
import { DELIVER_SIGNAL } from '../sql/signal.sql';
import { toJsonText } from '../serialization/json-value';
import type { GenDurableEvent } from '../telemetry/telemetry-events';
import { EngineHost } from './engine-host';
import type { EngineRuntime } from './engine-runtime';
import { InstanceQuery } from './instance-query';
import { QueueControl } from './queue-control';
import { resolveTarget, type Target, targetLabel } from './target';
import type { InsertOptions } from '../fsm/insert-options.interface';
import type { InsertRow } from '../instance/insert-row';
import { buildInsertRow } from '../instance/build-insert-row';
import type { AwaitResult, InstanceView } from '../instance/instance-view';
import type { InstanceFilter, ListPage, ListResult } from '../instance/instance-filter';
import type {
  CappedCount,
  PauseQueueResult,
  QueueStatus,
  ResumeQueueResult,
} from '../instance/queue-status';
import { faultPoint, FAULTS_ENABLED } from '../runtime/fault-points';
import type { CancelOptions, CancelResult } from '../instance/cancel-options';
import { cancelInstance, runCancel } from './cancel-instance';
import type { RetryOptions } from '../instance/retry-options';
import { retryInstance } from './retry-instance';

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
    const row = buildInsertRow(definition, options, this.runtime.options);
    const holder = options?.onConflict === 'return' && row.correlationKey !== null;
    const batcher = this.runtime.batcher;
    if (options?.manager === undefined && batcher?.takesDurable && !holder) {
      return batcher.insert(row);
    }
    const client = await this.clientOf(options?.manager);
    if (holder) return this.insertOrHolder(row, client, options?.manager !== undefined);
    const inserted = await INSERT_INSTANCE.run(this.runtime.sql, row, client);
    if (!inserted) throw new DuplicateError(row.correlationKey ?? '');
    if (!options?.manager) this.pokeOrArm(inserted, row);
    return inserted.id;
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
   * `onConflict: 'return'`: one statement inserts or names the key's holder. When the holder
   * committed after that statement's snapshot (a concurrent insert of the same key), it is
   * looked up once more by key; a holder that has already left the key's scope lets the
   * insert be tried again, once.
   */
  private async insertOrHolder(
    row: InsertRow,
    client: PoolClient | undefined,
    inCallerTransaction: boolean,
  ): Promise<string> {
    const key = row.correlationKey ?? '';
    for (let attempt = 1; attempt <= 2; attempt++) {
      const answer = await INSERT_INSTANCE_OR_HOLDER.run(this.runtime.sql, row, client);
      if (answer) {
        if (answer.inserted && !inCallerTransaction) this.pokeOrArm(answer, row);
        return answer.id;
      }
      const current = await GET_INSTANCE_BY_KEY.run(
        this.runtime.sql,
        { correlationKey: key },
        client,
      );
      if (current) return current.id;
    }
    throw new DuplicateError(key);
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
    const row = buildInsertRow(definition, options, this.runtime.options, 'insertAsync');
    if (this.runtime.batcher?.offer(row)) return;
    const inserted = await INSERT_INSTANCE.run(this.runtime.sql, row);
    if (inserted) this.pokeOrArm(inserted, row);
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
    const rows = entries.map((entry, i) => {
      if (entry?.manager !== undefined) {
        throw new InvalidInputError(
          `insertAll[${i}].manager`,
          'pass manager as the third argument of insertAll',
        );
      }
      return buildInsertRow(definition, entry, this.runtime.options, `insertAll[${i}]`);
    });
    const client = await this.clientOf(options.manager);
    const inserted = await INSERT_INSTANCES.run(this.runtime.sql, { rows }, client);
    if (!options.manager) {
      this.runtime.pokes.poke(new Set(inserted.filter((r) => r.due).map((r) => r.queue)));
      if (inserted.some((r) => !r.due)) for (const row of rows) this.armWakeUp(row);
    }
    return inserted.map((r) => r.id);
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
    if (typeof name !== 'string' || name.length === 0) {
      throw new InvalidInputError('signal.name', 'must be a non-empty string');
    }
    if (
      options.dedupKey !== undefined &&
      (typeof options.dedupKey !== 'string' || options.dedupKey.length === 0)
    ) {
      throw new InvalidInputError('signal.dedupKey', 'must be a non-empty string');
    }
    const to = resolveTarget(target, 'signal.target');
    const payloadText = toJsonText(payload, 'signal.payload', this.runtime.options.maxStateBytes);
    const byId = 'id' in to;
    const delivery = {
      targetId: byId ? to.id : null,
      correlationKey: byId ? null : to.correlationKey,
      name,
      payloadText,
      dedupKey: options.dedupKey ?? null,
    };
    const client = await this.clientOf(options.manager);
    const cancelling = this.registry.cancellingFsms(name);
    if (cancelling !== null) {
      // docs/design.md §27.2 `cancelOn`: for a target of such an FSM the delivery is a cancel,
      // and nothing is stored; a target of any other FSM (or none) gets the plain delivery.
      const cancelled = await runCancel(
        this.runtime,
        {
          targetId: delivery.targetId,
          correlationKey: delivery.correlationKey,
          reason: `signal ${name}`,
          children: 'cascade',
          fence: false,
          descendantsOnly: false,
          onlyFsms: cancelling,
        },
        client,
      );
      if (cancelled !== null) {
        if (cancelled.alreadyTerminal.length > 0) throw new NoTargetError(targetLabel(to));
        return;
      }
    }
    const row = await DELIVER_SIGNAL.run(this.runtime.sql, delivery, client);
    if (!row) {
      throw new NoTargetError(targetLabel(to));
    }
    if (FAULTS_ENABLED) await faultPoint('signal.afterCommit', { ids: [row.id] });
    if (row.status === 'runnable' && row.due && !options.manager) {
      this.runtime.pokes.poke([row.queue]);
    }
  }

  /**
   * The instance row, or null. `target`: an id, `{ id }` or `{ correlationKey }` (by key: only
   * the current occupant, docs/design.md §11).
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
   * `target`: an id, `{ id }` or `{ correlationKey }` (the key's current occupant, looked up
   * once; `not_found` when the key is free).
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
   * How many instances match `filter`, examining at most `cap` rows (default 10 000) through
   * the index its filter allows; `capped: true` means there are at least `count`. One statement.
   */
  count(filter: InstanceFilter = {}, options?: { cap?: number }): Promise<CappedCount> {
    return this.instanceQuery.count(filter, options);
  }

  private get instanceQuery(): InstanceQuery {
    this.query ??= new InstanceQuery(this.runtime.sql);
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
