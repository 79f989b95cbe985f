import type { Pool, PoolConfig } from 'pg';

import type { CancelOptions } from '../control/cancel-options';
import type { InsertOptions } from '../fsm/insert-options.interface';
import type { RetryOptions } from '../control/retry-options';

/**
 * What a `GenDurableClient` knows of one FSM (docs/design.md §32; docs/client.md "FSM
 * descriptions"). The client has no registry: an FSM described here is inserted at its
 * `initial` step on its `version` and `queue`, its steps (when listed) are checked on insert and
 * retry, and a signal named in its `cancelOn` cancels as the engine's delivery does. An FSM not
 * described can still be inserted with an explicit `step` (and `version`, default 1).
 */
export interface ClientFsm {
  /** The step new instances start at (the FSM's `initial`). */
  readonly initial: string;
  /** The version new instances run on. Default 1. */
  readonly version?: number;
  /** The queue new instances go to. Default `'default'`. */
  readonly queue?: string;
  /** Its step names: when given, an insert or retry naming another step is `UnknownStepError`. */
  readonly steps?: readonly string[];
  /** Signal names that cancel the instance instead of being stored (`@DurableFsm({ cancelOn })`). */
  readonly cancelOn?: readonly string[];
  /**
   * The default deadline of its inserts, ms (`@DurableFsm({ deadlineMs })`,
   * docs/operations-control.md "Instance deadlines"); an insert's `deadline` / `deadlineInMs`
   * wins. Default none.
   */
  readonly deadlineMs?: number;
  /** The FSM's state codec, when it has one (`dump` runs on inserted and retried state). */
  readonly stateCodec?: {
    load(stored: Record<string, unknown>): unknown;
    dump(state: unknown): Record<string, unknown>;
  };
}

/** Options of `new GenDurableClient(connection, options)`. */
export interface GenDurableClientOptions {
  /** The schema of the tables, as the module's `schema` option. Default `'public'`. */
  readonly schema?: string;
  /** The engine name, as the module's `name` option (it names the poke channel). Default `'GenDurable'` (the module's). */
  readonly name?: string;
  /** FSM name → what the client needs to insert it. Default none. */
  readonly fsms?: Readonly<Record<string, ClientFsm>>;
  /** Largest serialized state or signal payload, bytes. Default 1 MiB (the module's default). */
  readonly maxStateBytes?: number;
  /** Client-side timeout of every statement, ms. Default 30 000 (the module's default). */
  readonly statementTimeout?: number;
  /** Named prepared statements; `false` behind transaction-pooling proxies. Default true. */
  readonly preparedStatements?: boolean;
}

/**
 * What the client connects through: a `pg` Pool it is given (never closed by `close()`), or a
 * connection string or pool config, from which it creates a pool it owns and closes.
 */
export type ClientConnection = Pool | string | PoolConfig;

/**
 * Options of `GenDurableClient.insert`: the engine's insert options without `manager` (the
 * client joins no TypeORM transaction), plus `version` for an FSM not described to the client.
 */
export type ClientInsertOptions = Omit<InsertOptions, 'manager'> & {
  /** The FSM version to run, when the FSM is not described in `fsms`. Default 1. */
  version?: number;
};

/** Options of `GenDurableClient.cancel` (as `EngineService.cancel`). */
export type ClientCancelOptions = CancelOptions;

/** Options of `GenDurableClient.retry` (as `EngineService.retry`). */
export type ClientRetryOptions<S = Record<string, unknown>> = RetryOptions<S>;
