import { inspect } from 'node:util';

import type { PoolClient } from 'pg';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

import { sendCancelRequest } from '../db/cancel-request';
import { isConnectionLevel, type SqlExecutor } from '../db/sql-executor';
import type { EntryKind } from '../fsm/outcome-kinds';
import { ConfigurationError } from '../errors/configuration.error';
import {
  STEP_ISOLATION_LEVELS,
  STEP_TRANSACTION_BOUNDS,
  stepTransactionBegin,
} from '../sql/transaction.sql';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import type { FlushEntry, FlushReply } from './flush-entry';
import type { Flusher } from './flusher';
import { writeFlush } from './flush-write';

/**
 * The outcomes whose step's writes roll back (docs/transactional-steps.md): a retry and a stop
 * are failures, and a `cancel` entry is a cancelled step. The entry then commits alone, through
 * the flusher, as a plain step's would.
 */
const ROLLED_BACK: ReadonlySet<EntryKind> = new Set<EntryKind>(['retry', 'stop', 'cancel']);

/**
 * Opens the transactions of transactional steps (docs/transactional-steps.md) on the engine's
 * DataSource: always its primary, never a read replica (`readDataSource` is not used here).
 */
export class TransactionalSteps {
  constructor(
    private readonly dataSource: DataSource,
    private readonly sql: SqlExecutor,
    private readonly flusherFor: (queue: string) => Flusher,
    /** The lease, ms: the least idle-in-transaction bound (see {@link StepTransaction.open}). */
    private readonly leaseTtl: number,
  ) {}

  /** A transaction for one run of a transactional step, not yet opened; `timeoutMs` = its timeout. */
  begin(timeoutMs: number | undefined): StepTransaction {
    const idleMs = Math.max(this.leaseTtl, timeoutMs ?? 0);
    return new StepTransaction(this.dataSource, this.sql, this.flusherFor, idleMs);
  }
}

/**
 * One transactional step's transaction: opened before the step runs, its `manager` handed to
 * the step, then either the step's outcome written in it by the flush's own statements
 * (`writeFlush`: ownership and `claim_seq` fencing, history, children, inbox consumption,
 * join) and committed once, or rolled back. Not reusable.
 */
export class StepTransaction {
  private runner: QueryRunner | undefined;
  /** The connection and its transaction, once the step's first statement asked for them. */
  private opened: Promise<PoolClient> | undefined;
  private threw = false;
  /** The connection-level error the step threw: its transaction's connection was lost. */
  private connectionError: unknown;
  /** The step ran past its timeout and may still be using the connection. */
  private abandoned = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly sql: SqlExecutor,
    private readonly flusherFor: (queue: string) => Flusher,
    private readonly idleMs: number,
  ) {}

  /** The step's EntityManager, bound to the transaction's connection; undefined before `open`. */
  get manager(): EntityManager | undefined {
    return this.runner?.manager;
  }

  /**
   * Prepares the step's transaction: a TypeORM query runner on the primary, told that its
   * transaction is open (so `ctx.manager` never starts one of its own and
   * `ctx.manager.transaction()` nests a savepoint). The connection and `START TRANSACTION` wait
   * for the step's first statement through `ctx.manager` (see {@link begin}): a step that runs
   * none holds no connection, and its outcome commits through the flusher as a plain step's
   * (docs/transactional-steps.md "What it costs").
   */
  open(): void {
    const runner = this.dataSource.createQueryRunner('master');
    this.runner = runner;
    const state = transactionState(runner);
    state.isTransactionActive = true;
    state.transactionDepth = 1;
    const connect = runner.connect.bind(runner);
    // Every statement of the runner (query, stream, savepoints, COMMIT) asks for its connection
    // through `connect`: the first one checks it out and begins the transaction.
    runner.connect = () => (this.opened ??= this.begin(runner, connect));
  }

  /**
   * Checks out a pooled connection through TypeORM (its `pg` pool is the engine's) and, in one
   * round trip, begins the transaction and bounds how long it may sit idle: the lease or the
   * step's timeout, whichever is longer (docs/transactional-steps.md "Timeouts"). A failure is
   * the failure of the step's statement that asked for it. A connection whose BEGIN failed is
   * destroyed: its transaction state is unknown.
   * NOTE: TypeORM's transaction-start events are not broadcast for this transaction (a
   * subscriber's statement there would wait for this very connection); commit and rollback are.
   */
  private async begin(runner: QueryRunner, connect: () => Promise<unknown>): Promise<PoolClient> {
    const text = stepTransactionBegin(this.idleMs, isolationLevel(this.dataSource));
    await connect();
    const client = this.client(runner);
    try {
      await this.sql.controlOn(client, STEP_TRANSACTION_BOUNDS, text);
    } catch (err) {
      // TypeORM's 'error' listener on the connection releases it with the error: destroyed.
      if (!runner.isReleased) client.emit('error', asError(err));
      throw err;
    }
    return client;
  }

  /**
   * The step threw: its writes roll back whatever its outcome routes to. `timedOut`: it ran
   * past its timeout and may still be running a statement on the connection: that statement is
   * cancelled (a CancelRequest) and the connection destroyed, the server rolling back with the
   * session, so no ROLLBACK waits behind a statement stuck on a lock or a sleep.
   */
  stepThrew(timedOut: boolean, error?: unknown): void {
    this.threw = true;
    this.abandoned ||= timedOut;
    // TypeORM wraps the driver's error (QueryFailedError.driverError).
    const driverError = (error as { driverError?: unknown } | undefined)?.driverError;
    if (isConnectionLevel(error)) this.connectionError ??= error;
    else if (isConnectionLevel(driverError)) this.connectionError ??= driverError;
  }

  /**
   * Commits `entry` (the step's outcome) with the step's writes, exactly once, and answers as
   * the flusher would. A thrown step, a `retry`/`stop` outcome and a cooperative cancel roll
   * the writes back and commit the entry alone through `commitAlone` (the failure's record,
   * as today). A stale claim rolls everything back: `stale`. A connection lost under the step,
   * a failure of the write or of the COMMIT answers `error`: the row stays executing for the reaper, and the step's writes
   * committed together with its outcome or not at all.
   */
  async finish(
    entry: FlushEntry,
    commitAlone: (entry: FlushEntry) => Promise<FlushReply>,
  ): Promise<FlushReply> {
    const runner = this.runner;
    // The step threw because its transaction's connection died (a reset, a killed backend, a
    // Postgres restart): that is not the step's failure, so no attempt is spent and nothing is
    // recorded as its error. Its writes went with the connection; the row stays executing for
    // the reaper, which runs the step again, as after a crash.
    // TypeORM releases the runner when its connection reports an error while idle, and the
    // step's next statement then throws that the runner was released: the same loss.
    if (
      this.threw &&
      runner !== undefined &&
      (this.connectionError !== undefined || runner.isReleased)
    ) {
      await this.close(this.connectionError);
      return 'error';
    }
    if (runner === undefined || this.threw || ROLLED_BACK.has(entry.kind)) {
      await this.close();
      return commitAlone(entry);
    }
    // The step ran no statement through `ctx.manager`: no transaction was opened, nothing of
    // it is to roll back, and its outcome commits as a plain step's, in a group commit.
    if (this.opened === undefined) {
      await this.close();
      return commitAlone(entry);
    }
    try {
      // A statement the step did not await may still be opening the transaction.
      const client = await this.opened;
      // The connection died under the step (the server ended it idle, a reset): its writes went
      // with it, so its outcome must not commit alone. The reaper re-runs it after the lease.
      if (runner.isReleased) return 'error';
      const effects = await writeFlush(this.sql, client, [entry]);
      if (!effects.committed.some((e) => e.id === entry.id)) {
        await this.close();
        return 'stale';
      }
      if (effects.cancelledIds.includes(entry.id)) {
        // A cancel was requested while the step ran: the instance ends cancelled, and nothing
        // of the step persists (the flusher's statement ends it, as for a plain step).
        await this.close();
        return commitAlone(entry);
      }
      await runner.commitTransaction();
      if (FAULTS_ENABLED) await faultPoint('flush.afterCommit', { ids: [entry.id] });
      await runner.release();
      return this.flusherFor(entry.queue).committedApart(entry, effects);
    } catch (err) {
      await this.close(err);
      return 'error';
    }
  }

  /**
   * Rolls back (when still open) and returns the connection to the pool; one that failed at
   * the connection level, or whose ROLLBACK failed, is destroyed (docs/reliability.md, F-R1).
   * Never throws.
   */
  async close(failure?: unknown): Promise<void> {
    const runner = this.runner;
    if (runner === undefined || runner.isReleased) return;
    const opened = this.opened;
    if (opened === undefined) {
      // No statement ran: no connection, no transaction (and none may open from now on).
      transactionState(runner).isTransactionActive = false;
      await runner.release();
      return;
    }
    try {
      await opened;
    } catch {
      // The checkout or the BEGIN failed: a connection it got is already destroyed.
      if (!runner.isReleased) await runner.release();
      return;
    }
    if (runner.isReleased) return;
    let broken = failure !== undefined && isConnectionLevel(failure) ? failure : undefined;
    if (this.abandoned) broken ??= new Error('the transactional step ran past its timeout');
    if (broken === undefined && runner.isTransactionActive) {
      try {
        await runner.rollbackTransaction();
      } catch (err) {
        broken = err;
      }
    }
    if (this.abandoned) sendCancelRequest(this.client(runner));
    if (broken !== undefined && !runner.isReleased) {
      // TypeORM's 'error' listener on the connection releases it with the error: destroyed.
      this.client(runner).emit('error', asError(broken));
    }
    if (!runner.isReleased) await runner.release();
  }

  /** The `pg` client the runner holds (TypeORM's PostgreSQL runner keeps it there). */
  private client(runner: QueryRunner): PoolClient {
    return (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
  }
}

/**
 * The DataSource's `isolationLevel` (undefined: the server's default), refused when it is not
 * one `START TRANSACTION` accepts: the step's first statement fails with that error.
 */
function isolationLevel(dataSource: DataSource): string | undefined {
  const level = dataSource.options.isolationLevel;
  if (level !== undefined && !STEP_ISOLATION_LEVELS.has(level)) {
    throw new ConfigurationError(
      'dataSource.options.isolationLevel',
      `"${String(level)}" is not an isolation level a transactional step can start with ` +
        `(${[...STEP_ISOLATION_LEVELS].join(', ')})`,
    );
  }
  return level;
}

/**
 * The transaction bookkeeping of TypeORM's query runner (`BaseQueryRunner`): what its own
 * `startTransaction` sets, set here for a transaction the engine opened on it.
 */
function transactionState(runner: QueryRunner): {
  isTransactionActive: boolean;
  transactionDepth: number;
} {
  return runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
}

function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(inspect(value));
}
