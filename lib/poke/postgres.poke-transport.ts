import { randomBytes } from 'node:crypto';

import { Logger } from '@nestjs/common';
import { Client, type ClientConfig, type Notification, type Pool, type QueryConfig } from 'pg';

import type { SqlExecutor } from '../db/sql-executor';
import { LISTEN_POKES, NOTIFY_POKE, NOTIFY_PROBE, POKE_LISTENER_PING } from '../sql/poke.sql';
import { quoteIdent } from '../sql/statement';
import type { FinishedAnnouncement } from '../fsm/durable-event';
import {
  finishedPayloads,
  parseFinishedPayload,
  parsePokePayload,
  pokePayload,
} from './poke-channel';
import { settleWithin } from '../util/settle-within';
import type { PokeListener, PokeTransport } from './poke-transport.interface';

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5_000;
const CONNECT_TIMEOUT_MS = 10_000;
/** How long a delivery probe may take before the listener is judged deaf (a pooler). */
const PROBE_TIMEOUT_MS = 5_000;
/** Sender part of a probe payload; other nodes read it as a poke of a queue nobody runs. */
const PROBE_SENDER = 'gd-probe';

/** Pool-only keys of pg-pool options; the rest configures a client. */
const POOL_ONLY_KEYS = [
  'max',
  'min',
  'maxUses',
  'idleTimeoutMillis',
  'allowExitOnIdle',
  'maxLifetimeSeconds',
  'log',
  'Client',
];

/**
 * The connection settings of a dedicated client, taken from the pool the DataSource built (so
 * URL, host, credentials, SSL and `extra` all match the application's). NOTE: pg-pool stores
 * `password` and `ssl.key` as non-enumerable properties, so they are copied by name.
 */
export function listenerConnectionOf(pool: Pool, applicationName: string): ClientConfig {
  const options: ClientConfig = pool.options;
  const config: Record<string, unknown> = { ...pool.options };
  for (const key of POOL_ONLY_KEYS) delete config[key];
  return {
    ...config,
    password: options.password,
    ssl: options.ssl,
    keepAlive: true,
    application_name: applicationName,
  };
}

/**
 * The client class the pool was given (`new Pool({ Client })`, TypeORM `extra: { Client }`, e.g.
 * multiHostClient), for the listener; undefined for pg's own.
 */
export function listenerClientClassOf(pool: Pool): typeof Client | undefined {
  const options = pool.options as { Client?: unknown };
  const given = options.Client;
  return typeof given === 'function' && given.prototype instanceof Client
    ? (given as typeof Client)
    : undefined;
}

export interface PostgresPokeTransportOptions {
  /** `gen_durable:<schema>:<engine>:poke` (see postgresPokeChannel). */
  readonly channel: string;
  /** This engine's sender token; its own announcements are ignored. */
  readonly sender: string;
  /** Settings of the dedicated LISTEN client. */
  readonly connection: ClientConfig;
  /** Class of the LISTEN client when not pg's own (the pool's, see listenerClientClassOf). */
  readonly clientClass?: typeof Client | undefined;
  /** ms between liveness probes of the idle listener (the engine's heartbeatInterval). */
  readonly pingIntervalMs: number;
  /** Client-side timeout of the probe, ms. */
  readonly statementTimeoutMs: number;
}

/**
 * `poke: 'postgres'` (docs/design.md §16.4): announcements are `pg_notify` calls, each its own
 * autocommit statement on the pool; one dedicated `pg.Client` per engine LISTENs on the quoted
 * channel (on `poke.postgres.connectionString` when given), checks after each LISTEN that a
 * NOTIFY reaches it (not through a transaction pooler: see verifyDelivery), is probed every
 * `pingIntervalMs`, and reconnects with exponential backoff (100 ms … 5 s) when its connection
 * drops. While it is down or deaf, this node finds work by polling.
 */
export class PostgresPokeTransport implements PokeTransport {
  private client: Client | undefined;
  private listener: PokeListener | undefined;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private pinging = false;
  private backoffMs = BACKOFF_MIN_MS;
  /** Set once the listener was up: a later reconnect resyncs the local schedulers. */
  private wasListening = false;
  private outageLogged = false;
  private publishErrorLogged = false;
  private readonly inFlight = new Set<Promise<void>>();
  /** Clients already given up on (a failure reports through several events). */
  private readonly lost = new WeakSet<Client>();
  private readonly listenText: string;
  /** Nonces of delivery probes sent and not yet seen, with their resolvers. */
  private readonly probes = new Map<string, () => void>();
  private deafLogged = false;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    private readonly options: PostgresPokeTransportOptions,
  ) {
    this.listenText = LISTEN_POKES.text.replace('{channel}', quoteIdent(options.channel));
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  async start(listener: PokeListener): Promise<void> {
    this.listener = listener;
    await this.connect();
    this.pingTimer = setInterval(() => void this.ping(), this.options.pingIntervalMs);
  }

  publish(queue: string): void {
    this.send(pokePayload(this.options.sender, queue));
  }

  publishFinished(ended: readonly FinishedAnnouncement[]): void {
    for (const payload of finishedPayloads(this.options.sender, ended)) this.send(payload);
  }

  private send(payload: string): void {
    if (this.closed) return;
    const sent: Promise<void> = NOTIFY_POKE.run(this.sql, {
      channel: this.options.channel,
      payload,
    }).then(
      () => {
        this.publishErrorLogged = false;
      },
      (err: unknown) => {
        // Best-effort: a lost announcement costs the other nodes one poll.
        if (!this.publishErrorLogged) {
          this.logger.warn(
            `poke NOTIFY failed (other nodes fall back to their poll): ${String(err)}`,
          );
        }
        this.publishErrorLogged = true;
      },
    );
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.reconnectTimer = undefined;
    this.pingTimer = undefined;
    for (const resolve of this.probes.values()) resolve();
    await Promise.allSettled([...this.inFlight]);
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }

  /** One connection attempt; on failure schedules the next one. Never throws. */
  private async connect(): Promise<void> {
    this.reconnectTimer = undefined;
    if (this.closed) return;
    const client = new (this.options.clientClass ?? Client)(this.options.connection);
    client.on('error', (err) => this.lose(client, err));
    client.on('end', () => this.lose(client, undefined));
    client.on('notification', (message: Notification) => {
      if (client === this.client && message.channel === this.options.channel && message.payload) {
        this.receive(message.payload);
      }
    });
    try {
      await settleWithin(
        client.connect().then(() => client.query(this.listenText)),
        CONNECT_TIMEOUT_MS,
        () => new Error(`poke listener: no connection within ${CONNECT_TIMEOUT_MS} ms`),
      );
    } catch (err) {
      this.lose(client, err);
      return;
    }
    if (this.lost.has(client)) return;
    if (this.closed) {
      this.lost.add(client);
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.backoffMs = BACKOFF_MIN_MS;
    if (this.outageLogged) this.logger.log(`poke listener on ${this.options.channel} reconnected`);
    this.outageLogged = false;
    if (this.wasListening) this.listener?.resync();
    this.wasListening = true;
    this.track(this.verifyDelivery(client));
  }

  /**
   * Sends one NOTIFY on the pool and waits for it on the LISTEN session. Through a
   * transaction pooler (PgBouncer `pool_mode = transaction`) the LISTEN ran on a server
   * connection that went back to the pool, so the probe never arrives: the listener is
   * dropped (this node polls; the next reconnect probes again) and `degraded` is reported once.
   */
  private async verifyDelivery(client: Client): Promise<void> {
    const nonce = randomBytes(6).toString('hex');
    let timer: NodeJS.Timeout | undefined;
    const seen = new Promise<boolean>((resolve) => {
      this.probes.set(nonce, () => resolve(true));
      timer = setTimeout(() => resolve(false), PROBE_TIMEOUT_MS);
    });
    try {
      await NOTIFY_PROBE.run(this.sql, {
        channel: this.options.channel,
        payload: pokePayload(PROBE_SENDER, nonce),
      });
    } catch {
      // The pool is down: nothing is learnt about the listener; the ping decides its fate.
      this.probes.delete(nonce);
      clearTimeout(timer);
      return;
    }
    const delivered = await seen;
    clearTimeout(timer);
    this.probes.delete(nonce);
    if (delivered || this.closed || client !== this.client) return;
    if (!this.deafLogged) {
      this.deafLogged = true;
      const message =
        `poke listener on ${this.options.channel} received no notification within ${PROBE_TIMEOUT_MS} ms of a NOTIFY: ` +
        'LISTEN does not work through a transaction pooler (PgBouncer pool_mode = transaction); this node finds work by polling. ' +
        'Give the listener a direct connection: poke: { postgres: { connectionString } }';
      this.logger.warn(message);
      this.listener?.degraded(message);
    }
    this.lose(client, new Error('the listener received no delivery probe'));
  }

  private track(work: Promise<void>): void {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work));
  }

  /** The connection (or an attempt) failed: drop it and retry after the backoff. */
  private lose(client: Client, err: unknown): void {
    if (this.lost.has(client)) return;
    this.lost.add(client);
    if (this.client === client) this.client = undefined;
    client.end().catch(() => undefined);
    if (this.closed) return;
    if (!this.outageLogged) {
      this.logger.warn(
        `poke listener on ${this.options.channel} is down (this node polls meanwhile; reconnecting): ${describe(err)}`,
      );
      this.outageLogged = true;
    }
    if (this.reconnectTimer) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
  }

  private async ping(): Promise<void> {
    const client = this.client;
    if (!client || this.pinging || this.closed) return;
    this.pinging = true;
    try {
      const probe: QueryConfig & { query_timeout?: number } = {
        text: POKE_LISTENER_PING.text,
        query_timeout: this.options.statementTimeoutMs,
      };
      await client.query(probe);
    } catch (err) {
      this.lose(client, err);
    } finally {
      this.pinging = false;
    }
  }

  private receive(payload: string): void {
    const finished = parseFinishedPayload(payload);
    if (finished) {
      if (finished.sender !== this.options.sender) this.listener?.finished?.(finished.ended);
      return;
    }
    const parsed = parsePokePayload(payload);
    if (parsed?.sender === PROBE_SENDER) {
      this.probes.get(parsed.queue)?.();
      return;
    }
    if (!parsed || parsed.sender === this.options.sender) return;
    this.listener?.poke(parsed.queue);
  }
}

function describe(err: unknown): string {
  if (err === undefined) return 'connection ended';
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : JSON.stringify(err);
}
