import type { Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';

import { renderStatement, type Statement, type StatementRunner } from '../sql/statement';
import { BEGIN_WITH_TIMEOUTS, COMMIT, ROLLBACK } from '../sql/transaction.sql';
import { withArrayLiterals } from './array-literal';
import { sendCancelRequest } from './cancel-request';
import { classifyError, isConnectionLevel } from './error-class';
import { guardPoolClients } from './pool-client-guard';

export { classifyError, isConnectionLevel, isTransient } from './error-class';

/** Something a statement can run on: a pooled client inside a transaction, or the pool. */
export type Queryable = PoolClient;

/** node-postgres honours `query_timeout` per query; its typings omit it. */
type TimedQueryConfig = QueryConfig & { query_timeout?: number };

/** What the statement hook sees for each statement (tests count these; docs/design.md §24.1). */
export interface StatementEvent {
  readonly name: string;
  readonly inTransaction: boolean;
}

export type StatementListener = (event: StatementEvent) => void;

export interface SqlExecutorOptions {
  readonly schema: string;
  /** Named prepared statements (default true); false for transaction-pooling proxies. */
  readonly preparedStatements: boolean;
  /**
   * Timeout of each statement, ms (docs/design.md §26.4): client-side on every statement,
   * server-side too (`SET LOCAL statement_timeout` in a transaction; a cancel request after a
   * client-side timeout outside one).
   */
  readonly statementTimeoutMs: number;
  /**
   * Server-side `lock_timeout` and `idle_in_transaction_session_timeout` of engine
   * transactions, ms (see {@link transactionTimeouts}). Default: derived from
   * `statementTimeoutMs` alone (the lease is unknown here).
   */
  readonly lockTimeoutMs?: number;
  readonly idleInTransactionMs?: number;
}

/**
 * The server-side bounds of an engine transaction, derived from the options
 * (docs/reliability.md, finding F-R9): a flush takes milliseconds, so a session idle
 * inside one for `leaseTtl / 30` (clamped to [1 s, statementTimeout]; 2 s by default) is a
 * client that went dark, and the server ends it, releasing its row locks. A statement of a
 * live client waits at most as long for a lock, then the flush is retried on a fresh
 * connection: one dark worker never stalls the others' commits for longer than that.
 */
export function transactionTimeouts(
  leaseTtl: number,
  statementTimeout: number,
): { idleInTransactionMs: number; lockTimeoutMs: number } {
  const idle = Math.min(Math.max(Math.round(leaseTtl / 30), 1_000), statementTimeout);
  return { idleInTransactionMs: idle, lockTimeoutMs: idle };
}

const PREPARED_NAME_LIMIT = 63;
/** The default `leaseTtl`, for the transaction bounds of an executor built without one. */
const DEFAULT_LEASE_TTL_MS = 60_000;

/**
 * The one seam through which all engine SQL runs, on the host DataSource's `pg` pool.
 * Renders each statement once per schema, runs it as a named prepared statement, applies the
 * client-side timeout and reports every statement (including BEGIN/COMMIT) to listeners.
 */
export class SqlExecutor implements StatementRunner {
  private readonly rendered = new Map<string, { text: string; name: string }>();
  private readonly listeners = new Set<StatementListener>();

  constructor(
    readonly pool: Pool,
    readonly options: SqlExecutorOptions,
  ) {
    guardPoolClients(pool);
  }

  get schema(): string {
    return this.options.schema;
  }

  /** Registers a statement listener; returns the function that removes it. */
  onStatement(listener: StatementListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Runs one statement's positional `values` on `on` (a client in a transaction), or on a
   * pooled connection. Callers outside lib/sql do not come here directly: a statement runs as
   * `STATEMENT.run(executor, input)`, which builds `values` and decodes the rows.
   */
  async queryResult<R extends QueryResultRow = QueryResultRow>(
    statement: Statement,
    values: readonly unknown[] = [],
    on?: Queryable,
  ): Promise<QueryResult<R>> {
    const prepared = this.prepare(statement);
    this.emit(statement.name, on !== undefined);
    const config: TimedQueryConfig = {
      text: prepared.text,
      values: withArrayLiterals(values) as unknown[],
      query_timeout: this.options.statementTimeoutMs,
      ...(this.options.preparedStatements ? { name: prepared.name } : {}),
    };
    if (on) return on.query<R>(config);
    const lease = await this.checkout();
    try {
      return await lease.client.query<R>(config);
    } catch (err) {
      if (isConnectionLevel(err)) {
        // The server may still run a statement the client gave up on (waiting for a lock,
        // holding the locks it took): cancel it there before the connection is destroyed.
        if (isClientTimeout(err)) sendCancelRequest(lease.client);
        lease.fail(err as Error);
      }
      throw err;
    } finally {
      lease.release();
    }
  }

  /**
   * A pooled client with an 'error' listener attached for as long as it is checked out.
   * NOTE: a checked-out client emits 'error' when its connection dies outside a query (a
   * terminated backend's FATAL arriving between two statements, or in the same TCP chunk as
   * a ReadyForQuery); the pool listens only on idle clients, so without a listener that is an
   * uncaught exception that kills the process. The listener is attached in pool.connect's
   * callback, synchronously: with the promise form it would come a microtask after the pool
   * handed over a brand-new client, too late for a FATAL parsed with the startup's
   * ReadyForQuery (docs/reliability.md, finding F-R1). A client that failed is destroyed.
   * Waiting for a client is bounded by the statement timeout too (docs/design.md §26.4): a pool without
   * `connectionTimeoutMillis` waits forever on a half-open peer, which hung a scheduler's pick
   * for as long as the partition lasted (finding F-R7). A client that arrives after the caller
   * gave up goes straight back to the pool.
   */
  private checkout(): Promise<{
    client: PoolClient;
    fail(err: Error): void;
    readonly failed: Error | undefined;
    release(): void;
  }> {
    return new Promise((resolve, reject) => {
      let gaveUp = false;
      const timer = setTimeout(() => {
        gaveUp = true;
        reject(
          new Error(
            `timeout: no database connection within ${this.options.statementTimeoutMs} ms (statementTimeout)`,
          ),
        );
      }, this.options.statementTimeoutMs);
      this.pool.connect((err, client) => {
        clearTimeout(timer);
        if (gaveUp) {
          client?.release(err ?? undefined);
          return;
        }
        if (err || !client) {
          reject(err ?? new Error('the pool handed out no client'));
          return;
        }
        let failed: Error | undefined;
        const onError = (e: Error): void => {
          failed ??= e;
        };
        client.on('error', onError);
        resolve({
          client,
          fail: (e) => {
            failed ??= e;
          },
          get failed() {
            return failed;
          },
          release: () => {
            client.off('error', onError);
            client.release(failed);
          },
        });
      });
    });
  }

  /**
   * Runs `fn` in one transaction on one pooled client: BEGIN, fn, COMMIT (ROLLBACK on throw).
   * BEGIN carries the server-side bounds in its round trip (docs/design.md §26.4): `SET LOCAL`
   * statement_timeout, lock_timeout and idle_in_transaction_session_timeout, so a transaction
   * whose client goes dark releases its locks within seconds and a statement waiting on a
   * dead client's locks gives up. A failed connection is destroyed, never reused: a retry
   * gets a fresh one.
   */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const lease = await this.checkout();
    const client = lease.client;
    try {
      await this.control(client, BEGIN_WITH_TIMEOUTS, this.beginText());
      const result = await fn(client);
      await this.control(client, COMMIT);
      return result;
    } catch (err) {
      if (isConnectionLevel(err)) {
        lease.fail(err as Error);
      } else if (lease.failed === undefined) {
        try {
          await this.control(client, ROLLBACK);
        } catch (rollbackErr) {
          lease.fail(rollbackErr as Error);
        }
      }
      throw err;
    } finally {
      lease.release();
    }
  }

  private beginTextCache: string | undefined;

  private beginText(): string {
    if (this.beginTextCache === undefined) {
      const ms = (n: number): string => String(Math.max(1, Math.floor(n)));
      const statementMs = this.options.statementTimeoutMs;
      const derived = transactionTimeouts(DEFAULT_LEASE_TTL_MS, statementMs);
      this.beginTextCache = BEGIN_WITH_TIMEOUTS.text
        .replace('{statementMs}', ms(statementMs))
        .replace('{lockMs}', ms(this.options.lockTimeoutMs ?? derived.lockTimeoutMs))
        .replace('{idleMs}', ms(this.options.idleInTransactionMs ?? derived.idleInTransactionMs));
    }
    return this.beginTextCache;
  }

  /**
   * Runs a transaction-control statement's rendered `text` (several statements at most, no
   * parameters: a simple query) on `client`, reported to listeners under the statement's name:
   * a transactional step's `START TRANSACTION` with its bound (docs/transactional-steps.md).
   */
  controlOn(client: PoolClient, statement: Statement, text: string): Promise<void> {
    return this.control(client, statement, text);
  }

  private async control(
    client: PoolClient,
    statement: Statement,
    text = statement.text,
  ): Promise<void> {
    this.emit(statement.name, true);
    await client.query({
      text,
      query_timeout: this.options.statementTimeoutMs,
    } as TimedQueryConfig);
  }

  private prepare(statement: Statement): { text: string; name: string } {
    let prepared = this.rendered.get(statement.name);
    if (!prepared) {
      const name = `gd/${this.options.schema}/${statement.name}`.slice(0, PREPARED_NAME_LIMIT);
      prepared = { text: renderStatement(statement, this.options.schema), name };
      this.rendered.set(statement.name, prepared);
    }
    return prepared;
  }

  private emit(name: string, inTransaction: boolean): void {
    if (this.listeners.size === 0) return;
    for (const listener of this.listeners) {
      try {
        listener({ name, inTransaction });
      } catch {
        // A listener is a test or telemetry hook: it never breaks a statement.
      }
    }
  }
}

/** A client-side timeout: the statement may still be running on the server. */
function isClientTimeout(err: unknown): boolean {
  return classifyError(err) === 'connection' && /^Query read timeout$/.test((err as Error).message);
}
