import { Pool } from 'pg';

import { Schedules } from '../cron/schedules';
import { insertConflictOf } from '../instance/insert-conflict';
import { insertInstance } from '../control/insert-instance';
import { type ControlSchedules, InstanceControl } from '../control/instance-control';
import { InvalidInputError } from '../errors/invalid-input.error';
import { buildInsertRow } from '../instance/build-insert-row';
import type {
  ClientConnection,
  ClientInsertOptions,
  GenDurableClientOptions,
} from './client-options';
import { ClientRuntime } from './client-runtime';

/** The schedule operations the client offers (docs/design.md §29). */
export type ClientSchedules = ControlSchedules;

/**
 * A Nest-free client of a gen-durable database (docs/design.md §32; docs/client.md), for
 * scripts, CLIs and services that run no engine: instance control — get, list, count, history,
 * inbox, signal, cancel, retry, the bulk actions, queue pause / resume / status, explain,
 * stats — from {@link InstanceControl}, the class `EngineService` extends too, over a runtime
 * on the client's pool; here only insert (of FSMs described in `fsms`, or named with their
 * step), schedules and `close`. What needs the FSM classes or the engines' limiter (`graph`,
 * `stepCounts`, `fork`, `registeredFsms`, `limiterStatus`) throws `NotAvailableError`. Writes
 * that make work runnable send the engine's NOTIFY poke afterwards (awaited before the call
 * resolves), so engines with `poke: 'postgres'` react at once (others at their next poll).
 */
export class GenDurableClient extends InstanceControl {
  private readonly runtime: ClientRuntime;
  private readonly pool: Pool;
  private readonly ownsPool: boolean;
  /**
   * Stored schedules: `list`, `get`, `pause`, `resume`, `remove`, and `trigger` (which inserts an
   * instance: its FSM must be described in `fsms`, else `FsmNotRegisteredError`).
   */
  readonly schedules: ClientSchedules;
  private closed: Promise<void> | undefined;

  /**
   * `connection`: a `pg` Pool (the caller's: `close()` leaves it open), or a connection
   * string or pool config (the client creates a pool and `close()` ends it).
   */
  constructor(connection: ClientConnection, options: GenDurableClientOptions = {}) {
    super();
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
    this.schedules = settledSchedules(
      new Schedules(
        this.runtime.sql,
        this.runtime.registry,
        this.runtime.options.maxStateBytes,
        () => undefined,
        (queues) => this.runtime.pokes.poke(queues),
      ),
      () => this.runtime.settle(),
    );
  }

  /** @internal instance control's runtime: the client's, over its pool. */
  protected controlRuntime(): ClientRuntime {
    return this.runtime;
  }

  /** @internal the client joins no TypeORM transaction: a signal runs on its own. */
  protected transactionOf(): Promise<undefined> {
    return Promise.resolve(undefined);
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
    const conflict = insertConflictOf(rest, 'insert');
    const answer = await insertInstance(this.runtime, row, conflict);
    if ((answer.inserted || answer.debounced) && answer.due && row.held !== true) {
      this.runtime.pokes.poke([answer.queue]);
    }
    await this.runtime.settle();
    return answer.id;
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

/**
 * The schedule operations over `ops`, with `trigger` resolving only once its poke's NOTIFY left
 * (a short-lived script ends after it); the others are `ops`' own, bound.
 */
function settledSchedules(ops: Schedules, settle: () => Promise<void>): ClientSchedules {
  return {
    list: ops.list.bind(ops),
    get: ops.get.bind(ops),
    pause: ops.pause.bind(ops),
    resume: ops.resume.bind(ops),
    remove: ops.remove.bind(ops),
    trigger: async (name) => {
      const id = await ops.trigger(name);
      await settle();
      return id;
    },
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
