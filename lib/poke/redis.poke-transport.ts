import { Logger } from '@nestjs/common';
import type { Redis, RedisOptions } from 'ioredis';

import type { RedisConnectionOptions } from '../options/gen-durable-options.interface';
import type { FinishedAnnouncement } from '../fsm/durable-event';
import {
  finishedPayloads,
  parseFinishedPayload,
  parsePokePayload,
  pokePayload,
} from './poke-channel';
import type { PokeListener, PokeTransport } from './poke-transport.interface';

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5_000;
const FIRST_CONNECT_WAIT_MS = 5_000;
const CLOSE_WAIT_MS = 1_000;

export interface RedisPokeTransportOptions {
  /**
   * `<redisPrefix>poke` (docs/design.md §34), or how to find it at start (the default prefix
   * names the database, read from PostgreSQL).
   */
  readonly channel: string | (() => Promise<string>);
  /** This engine's sender token; its own announcements are ignored. */
  readonly sender: string;
  /** A Redis URL or ioredis options (the `poke: { redis }` value). */
  readonly redis: RedisConnectionOptions;
  /** Prefix of the client names (CLIENT LIST shows `<prefix>-pub` / `<prefix>-sub`). */
  readonly clientName: string;
  /** Timeout of a PUBLISH, ms. */
  readonly commandTimeoutMs: number;
}

/** Reconnect delay after `times` failed attempts: 100 ms doubling to 5 s. */
function backoff(times: number): number {
  return Math.min(BACKOFF_MIN_MS * 2 ** Math.max(0, times - 1), BACKOFF_MAX_MS);
}

/**
 * `poke: { redis }` (docs/design.md §16.4): PUBLISH on one ioredis connection, SUBSCRIBE on another
 * (a subscribed connection can run nothing else). Both reconnect with backoff (100 ms … 5 s);
 * the subscriber resubscribes by itself. The publisher has no offline queue: while Redis is
 * down an announcement is dropped at once (the other nodes poll) instead of piling up.
 */
export class RedisPokeTransport implements PokeTransport {
  private pub: Redis | undefined;
  private sub: Redis | undefined;
  private listener: PokeListener | undefined;
  /** The channel, known once `start` resolved it. */
  private channel = '';
  private closed = false;
  private wasReady = false;
  private outageLogged = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly logger = new Logger('GenDurable');

  constructor(private readonly options: RedisPokeTransportOptions) {}

  get listening(): boolean {
    return this.sub?.status === 'ready';
  }

  async start(listener: PokeListener): Promise<void> {
    this.listener = listener;
    const configured = this.options.channel;
    this.channel = typeof configured === 'string' ? configured : await configured();
    // Loaded here, not at import: ioredis is an optional peer (options validation checked it).
    const { default: RedisClient } = await import('ioredis');
    const common: RedisOptions = { retryStrategy: backoff, lazyConnect: false };
    this.pub = this.connect(RedisClient, {
      ...common,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: this.options.commandTimeoutMs,
      connectionName: `${this.options.clientName}-pub`,
    });
    const sub = this.connect(RedisClient, {
      ...common,
      // The SUBSCRIBE below waits in the offline queue until the first connection; later
      // reconnects resubscribe automatically.
      maxRetriesPerRequest: null,
      autoResubscribe: true,
      connectionName: `${this.options.clientName}-sub`,
    });
    this.sub = sub;
    sub.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.receive(message);
    });
    sub.on('ready', () => {
      if (this.outageLogged) {
        this.logger.log(`poke subscriber on ${this.channel} reconnected`);
      }
      this.outageLogged = false;
      if (this.wasReady) this.listener?.resync();
      this.wasReady = true;
    });
    sub.on('error', (err: unknown) => this.outage(err));
    const subscribed = sub.subscribe(this.channel).then(
      () => undefined,
      () => undefined,
    );
    // Boot waits for the first attempt only: a Redis outage degrades to the poll, never fails boot.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, FIRST_CONNECT_WAIT_MS);
      const settle = (): void => {
        clearTimeout(timer);
        resolve();
      };
      void subscribed.then(settle);
      sub.once('error', settle);
    });
  }

  publish(queue: string): void {
    this.send(pokePayload(this.options.sender, queue));
  }

  publishFinished(ended: readonly FinishedAnnouncement[]): void {
    for (const payload of finishedPayloads(this.options.sender, ended)) this.send(payload);
  }

  private send(payload: string): void {
    const pub = this.pub;
    if (this.closed || !pub || pub.status !== 'ready') return;
    const sent: Promise<void> = pub.publish(this.channel, payload).then(
      () => undefined,
      (err: unknown) => this.outage(err),
    );
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    await Promise.all(
      [this.pub, this.sub].map((client) => (client ? disconnect(client) : Promise.resolve())),
    );
    this.pub = undefined;
    this.sub = undefined;
  }

  private connect(RedisClient: typeof Redis, extra: RedisOptions): Redis {
    const redis = this.options.redis;
    const client =
      typeof redis === 'string'
        ? new RedisClient(redis, extra)
        : new RedisClient({ ...(redis as RedisOptions), ...extra });
    // Without an 'error' listener ioredis reports every failed reconnect as unhandled.
    client.on('error', () => undefined);
    return client;
  }

  private outage(err: unknown): void {
    if (this.closed || this.outageLogged) return;
    this.outageLogged = true;
    this.logger.warn(
      `poke transport on Redis is down (nodes poll meanwhile; reconnecting): ${String(err)}`,
    );
  }

  private receive(payload: string): void {
    const finished = parseFinishedPayload(payload);
    if (finished) {
      if (finished.sender !== this.options.sender) this.listener?.finished?.(finished.ended);
      return;
    }
    const parsed = parsePokePayload(payload);
    if (!parsed || parsed.sender === this.options.sender) return;
    this.listener?.poke(parsed.queue);
  }
}

/** Closes a client without waiting on a Redis that may be down; resolves once the socket ended. */
async function disconnect(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  const ended = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, CLOSE_WAIT_MS);
    client.once('end', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  client.disconnect();
  await ended;
}
