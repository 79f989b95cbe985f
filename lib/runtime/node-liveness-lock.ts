import { Logger } from '@nestjs/common';
import { Client, type ClientConfig, type QueryConfig } from 'pg';

import {
  NODE_LOCK_BEGIN,
  NODE_LOCK_PING,
  NODE_LOCK_SETTINGS,
  NODE_LOCK_TRY,
} from '../sql/node-lock.sql';
import type { StatementRunner } from '../sql/statement';
import { settleWithin } from '../util/settle-within';

const CONNECT_TIMEOUT_MS = 10_000;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

/** What the node learnt when it tried for its lock. */
export type LivenessVerdict =
  /** Held: every earlier process with this nodeId is gone (their sessions ended). */
  | 'held'
  /** Another live session holds it: a process with this nodeId runs now. */
  | 'taken'
  /** The lock could not be tried (no connection): nothing is proven. */
  | 'unknown';

export interface NodeLivenessLockOptions {
  /** The lock's key text: schema, engine name and nodeId. */
  readonly key: string;
  /** Settings of the dedicated connection (those of the pool, see listenerConnectionOf). */
  readonly connection: ClientConfig;
  /** Class of the client when not pg's own (the pool's, e.g. multiHostClient). */
  readonly clientClass?: typeof Client | undefined;
  /** ms between liveness probes of the held connection (the engine's heartbeatInterval). */
  readonly pingIntervalMs: number;
  /** Client-side timeout of each statement, ms. */
  readonly statementTimeoutMs: number;
  /**
   * The lock was taken after boot (the holder at boot went away, or the connection was lost
   * and the lock taken again): every earlier process's claims may be reclaimed now.
   */
  readonly onAcquiredLater: () => void;
}

/**
 * A node's proof of liveness (docs/design.md §17.3): one dedicated connection holds a
 * transaction-level advisory lock keyed by (schema, engine name, nodeId) in a transaction left
 * open for the node's lifetime. PostgreSQL releases it the moment the session ends — a killed
 * process's socket closes at once — so a restarted node that takes the lock knows its
 * predecessor's connections are gone and may take back its claims without waiting for their
 * leases. The open transaction has no transaction id and no snapshot between statements (no
 * pinned horizon) and keeps its server connection through a transaction pooler.
 *
 * A node that finds the lock taken (a second live process with the same nodeId) keeps trying
 * every few seconds and meanwhile relies on the lease; a lost connection is reopened the same
 * way. One extra connection per node that runs queues.
 */
export class NodeLivenessLock {
  private client: Client | undefined;
  private closed = false;
  private booted = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  private takenLogged = false;
  private readonly logger = new Logger('GenDurable');

  constructor(private readonly options: NodeLivenessLockOptions) {}

  /** The lock is held now. */
  get held(): boolean {
    return this.client !== undefined;
  }

  /** Tries for the lock once at boot; keeps trying in the background unless held. */
  async acquire(): Promise<LivenessVerdict> {
    const verdict = await this.attempt();
    this.booted = true;
    if (verdict === 'taken') {
      this.logger.warn(
        `node liveness lock ${this.options.key} is held by another live process: two processes share this nodeId; ` +
          'startup reclaim falls back to the lease (give each process its own nodeId)',
      );
      this.takenLogged = true;
    }
    if (verdict !== 'held') this.scheduleRetry();
    this.pingTimer = setInterval(() => void this.ping(), this.options.pingIntervalMs);
    this.pingTimer.unref();
    return verdict;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.retryTimer = undefined;
    this.pingTimer = undefined;
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }

  private async attempt(): Promise<LivenessVerdict> {
    if (this.closed) return 'unknown';
    const client = new (this.options.clientClass ?? Client)(this.options.connection);
    client.on('error', () => this.lose(client));
    client.on('end', () => this.lose(client));
    try {
      const held = await settleWithin(
        (async () => {
          await client.connect();
          await client.query(this.timed(NODE_LOCK_BEGIN.text));
          await client.query(this.timed(NODE_LOCK_SETTINGS.text));
          const taken = await NODE_LOCK_TRY.run(this.runnerOn(client), { key: this.options.key });
          // The try ran through the extended protocol: its unnamed portal, and the snapshot it
          // holds, would stay open until the next message and pin the xmin horizon for a
          // whole ping interval. A simple-protocol statement destroys it at once.
          await client.query(this.timed(NODE_LOCK_PING.text));
          return taken;
        })(),
        CONNECT_TIMEOUT_MS,
        () => new Error(`node liveness lock: no answer within ${CONNECT_TIMEOUT_MS} ms`),
      );
      if (!held || this.closed) {
        await client.end().catch(() => undefined);
        return held ? 'unknown' : 'taken';
      }
      this.client = client;
      this.retryMs = RETRY_MIN_MS;
      return 'held';
    } catch (err) {
      await client.end().catch(() => undefined);
      this.logger.warn(`node liveness lock ${this.options.key} could not be tried: ${String(err)}`);
      return 'unknown';
    }
  }

  private timed(text: string): QueryConfig & { query_timeout: number } {
    return { text, query_timeout: this.options.statementTimeoutMs };
  }

  /** Runs typed statements on the lock's own client (not the pool), with the same timeout. */
  private runnerOn(client: Client): StatementRunner {
    return {
      queryResult: async (statement, values) => {
        const config: QueryConfig & { query_timeout: number } = {
          text: statement.text,
          values: [...values],
          query_timeout: this.options.statementTimeoutMs,
        };
        const result = await client.query(config);
        return { rows: result.rows, rowCount: result.rowCount };
      },
    };
  }

  private scheduleRetry(): void {
    if (this.closed || this.retryTimer) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.attempt().then((verdict) => {
        if (verdict === 'held') {
          if (this.takenLogged) this.logger.log(`node liveness lock ${this.options.key} taken`);
          this.takenLogged = false;
          if (this.booted) this.options.onAcquiredLater();
        } else this.scheduleRetry();
      });
    }, delay);
    this.retryTimer.unref();
  }

  /** The held connection failed: drop it and take the lock again. */
  private lose(client: Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    if (this.closed) return;
    this.logger.warn(
      `node liveness lock ${this.options.key}: its connection was lost; retaking it`,
    );
    this.scheduleRetry();
  }

  private async ping(): Promise<void> {
    const client = this.client;
    if (!client || this.closed) return;
    try {
      await client.query(this.timed(NODE_LOCK_PING.text));
    } catch {
      this.lose(client);
    }
  }
}
