import type { Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';

import { renderStatement, type Statement, type StatementRunner } from '../sql/statement';
import { BEGIN, BEGIN_WITH_IDLE_TIMEOUT, COMMIT, ROLLBACK } from '../sql/transaction.sql';

/** Something a statement can run on: a pooled client inside a transaction, or the pool. */
export type Queryable = PoolClient;

/** node-postgres honours `query_timeout` per query; its typings omit it. */
type TimedQueryConfig = QueryConfig & { query_timeout?: number };

/** What the statement hook sees for each statement (tests count these; SPEC §24.1). */
export interface StatementEvent {
  readonly name: string;
  readonly inTransaction: boolean;
}

export type StatementListener = (event: StatementEvent) => void;

export interface SqlExecutorOptions {
  readonly schema: string;
  /** Named prepared statements (default true); false for transaction-pooling proxies. */
  readonly preparedStatements: boolean;
  /** Client-side timeout of each statement, ms (SPEC §26.4). */
  readonly statementTimeoutMs: number;
}

const PREPARED_NAME_LIMIT = 63;

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
  ) {}

  get schema(): string {
    return this.options.schema;
  }

  /** Registers a statement listener; returns the function that removes it. */
  onStatement(listener: StatementListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Runs one statement on `on` (a client in a transaction), or on a pooled connection. */
  async query<R extends QueryResultRow = QueryResultRow>(
    statement: Statement,
    values: readonly unknown[] = [],
    on?: Queryable,
  ): Promise<R[]> {
    const result = await this.queryResult<R>(statement, values, on);
    return result.rows;
  }

  /** Like {@link query} but returns the full result (row counts). */
  async queryResult<R extends QueryResultRow = QueryResultRow>(
    statement: Statement,
    values: readonly unknown[] = [],
    on?: Queryable,
  ): Promise<QueryResult<R>> {
    const prepared = this.prepare(statement);
    this.emit(statement.name, on !== undefined);
    const config: TimedQueryConfig = {
      text: prepared.text,
      values: values as unknown[],
      query_timeout: this.options.statementTimeoutMs,
      ...(this.options.preparedStatements ? { name: prepared.name } : {}),
    };
    if (on) return on.query<R>(config);
    const lease = await this.checkout();
    try {
      return await lease.client.query<R>(config);
    } catch (err) {
      if (isConnectionLevel(err)) lease.fail(err as Error);
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
   * Waiting for a client is bounded by the statement timeout too (SPEC §26.4): a pool without
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
   * `idleInTransactionMs` bounds a transaction whose client stalls (SPEC §26.4).
   */
  async transaction<T>(
    fn: (tx: Queryable) => Promise<T>,
    options: { idleInTransactionMs?: number } = {},
  ): Promise<T> {
    const lease = await this.checkout();
    const client = lease.client;
    try {
      if (options.idleInTransactionMs === undefined) {
        await this.control(client, BEGIN);
      } else {
        const idleMs = String(Math.max(1, Math.floor(options.idleInTransactionMs)));
        await this.control(
          client,
          BEGIN_WITH_IDLE_TIMEOUT,
          BEGIN_WITH_IDLE_TIMEOUT.text.replace('{idleMs}', idleMs),
        );
      }
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

/**
 * True for failures after which the connection must not be reused: client-side timeouts,
 * broken sockets, server shutdown. Such clients are destroyed instead of returned to the pool.
 */
export function isConnectionLevel(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // 08xxx connection exceptions, 57P01..57P03 admin shutdown / crash / cannot connect now.
    return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
  }
  return /timeout|terminated|ECONNRESET|ECONNREFUSED|EPIPE|Connection terminated|not queryable/i.test(
    err.message,
  );
}

/** True for errors a retry can cure: connection-class and serialization/deadlock failures. */
export function isTransient(err: unknown): boolean {
  if (isConnectionLevel(err)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
}
