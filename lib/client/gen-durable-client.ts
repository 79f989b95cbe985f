import { Pool } from 'pg';

import { Schedules } from '../cron/schedules';
import type { SqlExecutor } from '../db/sql-executor';
import { cancelInstance } from '../control/cancel-instance';
import { deliverSignal } from '../control/deliver-signal';
import { insertInstance } from '../control/insert-instance';
import { readInstanceHistory, resolveHistoryPage } from '../control/instance-history';
import { InstanceQuery } from '../control/instance-query';
import { QueueControl } from '../control/queue-control';
import { retryInstance } from '../control/retry-instance';
import { resolveTarget, type Target } from '../control/target';
import { InvalidInputError } from '../errors/invalid-input.error';
import { buildInsertRow } from '../instance/build-insert-row';
import type { CancelResult } from '../control/cancel-options';
import type { HistoryEntry, HistoryPage } from '../instance/history-entry';
import type {
  CountOptions,
  InstanceCount,
  InstanceFilter,
  ListPage,
  ListResult,
} from '../control/instance-filter';
import type { InstanceView } from '../instance/instance-view';
import type { PauseQueueResult, QueueStatus, ResumeQueueResult } from '../instance/queue-status';
import { GET_INSTANCE_BY_ID, GET_INSTANCE_BY_KEY } from '../sql/instance.sql';
import type {
  ClientCancelOptions,
  ClientConnection,
  ClientInsertOptions,
  ClientRetryOptions,
  GenDurableClientOptions,
} from './client-options';
import { ClientRuntime } from './client-runtime';

/** The schedule operations the client offers (docs/design.md §29). */
export type ClientSchedules = Pick<
  Schedules,
  'list' | 'get' | 'pause' | 'resume' | 'trigger' | 'remove'
>;

/**
 * A Nest-free client of a gen-durable database (docs/design.md §32; docs/client.md), for
 * scripts, CLIs and services that run no engine: insert, signal, get, list, count, history,
 * cancel, retry, queue pause / resume / status and schedules. Each method runs the statements
 * `EngineService` runs, through the same functions, with the same checks and typed errors;
 * writes that make work runnable send the engine's NOTIFY poke afterwards, so engines with
 * `poke: 'postgres'` react at once (others at their next poll).
 */
export class GenDurableClient {
  private readonly runtime: ClientRuntime;
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  private readonly query: InstanceQuery;
  private readonly queues: QueueControl;
  private readonly scheduleOps: Schedules;
  private closed: Promise<void> | undefined;

  /**
   * `connection`: a `pg` Pool (the caller's: `close()` leaves it open), or a connection
   * string or pool config (the client creates a pool and `close()` ends it).
   */
  constructor(connection: ClientConnection, options: GenDurableClientOptions = {}) {
    if (connection instanceof Pool) {
      this.pool = connection;
      this.ownsPool = false;
    } else if (typeof connection === 'string' || isPlainObject(connection)) {
      this.pool = new Pool(
        typeof connection === 'string' ? { connectionString: connection } : connection,
      );
      this.ownsPool = true;
    } else {
      throw new InvalidInputError(
        'client.connection',
        'must be a pg Pool, a connection string or a pool config',
      );
    }
    this.runtime = new ClientRuntime(this.pool, options);
    this.query = new InstanceQuery(this.runtime.sql);
    this.queues = new QueueControl(this.runtime);
    this.scheduleOps = new Schedules(
      this.runtime.sql,
      this.runtime.registry,
      this.runtime.options.maxStateBytes,
      () => undefined,
      (queues) => this.runtime.pokes.poke(queues),
    );
  }

  /**
   * The client's statement runner, for the CLI's reads that have no client method.
   * @internal not part of the published types.
   */
  get sql(): SqlExecutor {
    return this.runtime.sql;
  }

  /** The schema the client addresses. */
  get schema(): string {
    return this.runtime.sql.schema;
  }

  /**
   * Inserts one instance of the FSM named `fsm` and resolves with its id once committed
   * (`DuplicateError` on an occupied key; `onConflict: 'return'` answers the holder). A described
   * FSM starts at its `initial` step unless `step` is given; an FSM not described needs `step`.
   * One statement, then the poke of a due row.
   */
  async insert(fsm: string, options: ClientInsertOptions = {}): Promise<string> {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidInputError('insert', 'options must be an object');
    }
    const { version, ...rest } = options;
    if ('manager' in rest) {
      throw new InvalidInputError('insert.manager', 'the client joins no TypeORM transaction');
    }
    const definition = this.runtime.insertDefinition(fsm, rest.step, version);
    const row = buildInsertRow(definition, rest, this.runtime.options);
    const holder = rest.onConflict === 'return' && row.correlationKey !== null;
    const answer = await insertInstance(this.runtime.sql, row, holder);
    if (answer.inserted && answer.due) this.runtime.pokes.poke([answer.queue]);
    await this.runtime.settle();
    return answer.id;
  }

  /**
   * Delivers a signal to a live instance (as `EngineService.signal`): stored once (or
   * recognised as a duplicate of `dedupKey`), `NoTargetError` when no live instance answers; a
   * name in a described FSM's `cancelOn` cancels the target instead.
   */
  async signal(
    target: Target,
    name: string,
    payload: unknown = {},
    options: { dedupKey?: string } = {},
  ): Promise<void> {
    await deliverSignal(this.runtime, target, name, payload, options.dedupKey);
    await this.runtime.settle();
  }

  /** The instance row, or null (by key: the live occupant, else the most recent ended one). */
  async get(target: Target): Promise<InstanceView | null> {
    const to = resolveTarget(target, 'get.target');
    return 'id' in to
      ? GET_INSTANCE_BY_ID.run(this.runtime.sql, { id: to.id })
      : GET_INSTANCE_BY_KEY.run(this.runtime.sql, { correlationKey: to.correlationKey });
  }

  /** One keyset page of instances matching `filter`, newest first (as `EngineService.list`). */
  list(filter: InstanceFilter = {}, page?: ListPage): Promise<ListResult> {
    return this.query.list(filter, page);
  }

  /** How many instances match `filter`, capped (as `EngineService.count`). */
  count(filter: InstanceFilter = {}, options?: CountOptions): Promise<InstanceCount> {
    return this.query.count(filter, options);
  }

  /** An instance's step history, newest first (as `EngineService.history`). */
  history(target: Target, options?: HistoryPage): Promise<HistoryEntry[]> {
    const to = resolveTarget(target, 'history.target');
    return readInstanceHistory(
      this.runtime.sql,
      to,
      resolveHistoryPage(options, 'history.options'),
    );
  }

  /** Cancels an instance (as `EngineService.cancel`); woken parents' queues are poked. */
  async cancel(target: Target, options?: ClientCancelOptions): Promise<CancelResult> {
    const to = resolveTarget(target, 'cancel.target');
    const result = await cancelInstance(this.runtime, to, options);
    await this.runtime.settle();
    return result;
  }

  /**
   * Runs a `failed` or `cancelled` instance again (as `EngineService.retry`). A `step` is
   * checked against a described FSM's `steps`; for an FSM not described it is taken as given.
   */
  async retry<S = Record<string, unknown>>(
    target: Target,
    options?: ClientRetryOptions<S>,
  ): Promise<void> {
    const to = resolveTarget(target, 'retry.target');
    await retryInstance(this.runtime, to, options);
    await this.runtime.settle();
  }

  /** Pauses `queue` on every node (as `EngineService.pauseQueue`). */
  async pauseQueue(queue: string, options?: { reason?: string }): Promise<PauseQueueResult> {
    const result = await this.queues.pause(queue, options);
    await this.runtime.settle();
    return result;
  }

  /** Resumes a paused queue on every node (as `EngineService.resumeQueue`). */
  async resumeQueue(queue: string): Promise<ResumeQueueResult> {
    const result = await this.queues.resume(queue);
    await this.runtime.settle();
    return result;
  }

  /**
   * Every paused queue, every queue with runnable rows and the described FSMs' queues (or only
   * `queue`), with capped counts (as `EngineService.queueStatus`; `served` is always false:
   * the client runs no scheduler).
   */
  queueStatus(queue?: string, options?: { cap?: number }): Promise<QueueStatus[]> {
    return this.queues.status(queue, options);
  }

  /**
   * Stored schedules: `list`, `get`, `pause`, `resume`, `remove`, and `trigger` (which inserts an
   * instance: its FSM must be described in `fsms`, else `FsmNotRegisteredError`).
   */
  get schedules(): ClientSchedules {
    return {
      list: () => this.scheduleOps.list(),
      get: (name) => this.scheduleOps.get(name),
      pause: (name) => this.scheduleOps.pause(name),
      resume: (name) => this.scheduleOps.resume(name),
      remove: (name) => this.scheduleOps.remove(name),
      trigger: async (name) => {
        const id = await this.scheduleOps.trigger(name);
        await this.runtime.settle();
        return id;
      },
    };
  }

  /** Waits for pending pokes and ends the pool the client created (a given pool stays open). Idempotent. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.runtime.settle();
      if (this.ownsPool) await this.pool.end();
    })();
    return this.closed;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
