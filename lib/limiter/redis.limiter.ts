import { Logger } from '@nestjs/common';
import type { Redis, RedisOptions } from 'ioredis';

import { type RedisNamespace, redisKeys } from '../db/engine-namespace';
import type { SqlExecutor } from '../db/sql-executor';
import { limitName } from '../fsm/limit-key';
import type { RedisConnectionOptions } from '../options/gen-durable-options.interface';
import { LIST_GATE_HOLDERS, MARK_REDIS_ADMITTED } from '../sql/limiter.sql';
import {
  type AdmitResult,
  gateHolder,
  type LimitClosure,
  type LimitConfig,
  type Limiter,
  type LimiterEntry,
  type LimiterSlot,
  type ReconcileResult,
} from './limiter.interface';
import { AdmitVerdicts } from './admit-verdicts';
import { upsertLimitConfigs } from './upsert-limit-configs';
import {
  ADMIT_SCRIPT,
  CLOSE_SCRIPT,
  CREDIT_ROW_SCRIPT,
  RENEW_SCRIPT,
  type RedisScript,
  SEED_SCRIPT,
} from './redis.scripts';
import { type RedisCounters, readRedisCounters } from './redis-limiter-counters';

/** Commands defined from redis.scripts.ts, called as (numberOfKeys, ...keys, ...args). */
type ScriptCommand = (
  numberOfKeys: number,
  ...keysAndArgs: (string | number)[]
) => Promise<unknown>;

const CONNECT_WAIT_MS = 2_000;
const COMMAND_TIMEOUT_MS = 2_000;
const WARN_EVERY_MS = 5_000;
const UNSEEDED = -1;

/** Reconnect backoff: 100 ms doubling to 2 s, forever (docs/design.md §26.9). */
export function redisRetryDelay(times: number): number {
  return Math.min(100 * 2 ** Math.min(Math.max(times - 1, 0), 5), 2_000);
}

/**
 * The Redis limiter (docs/design.md §16.3, §26.9) on ioredis, single-node Redis. Policies come from this
 * node's options (shards are ignored); the clock is Redis `TIME`.
 * Every key starts with the engine's Redis prefix (`redisPrefix`, default
 * `gd:<database>/<schema>/<name>:`, docs/design.md §34), written `<prefix>` below.
 * - Gate = sorted set `<prefix>conc:<key>`, member = row id, score = lease expiry; slot = {key, id}.
 *   Admitted gated rows are marked in Postgres with shard 1 (claimed rows carry the
 *   provisional 0): one statement per pick that admits gated rows, the Redis analogue of the
 *   PG admit's stamp.
 * - Rate = hash `<prefix>rate:<key>` `{t, s}` with a TTL.
 * - Fails closed: with Redis down, hanging or erroring, admission denies (the rows go back to
 *   runnable) and credit/renew are dropped (holders expire with their lease); it never throws
 *   into a scheduler. ioredis reconnects with backoff; commands never queue while offline.
 * - A seed marker (`<prefix>seed`) lives beside the data. Redis restarted empty (or flushed) loses it, and the
 *   next admit re-adds every gate holder Postgres knows (executing rows with a drawn shard)
 *   before it admits anything (docs/design.md §26.9).
 * `reconcile` has nothing to repair (holders expire) and answers zeros. K = 1 and
 * `concurrency_shard` stay in Postgres. `syncConfig` also upserts the policies into
 * gen_durable_bucket_configs, so every node and tool sees the same names.
 */
export class RedisLimiter implements Limiter {
  private client: Redis | undefined;
  private connecting: Promise<void> | undefined;
  private seeding: Promise<void> | undefined;
  /** Set by syncConfig (at start, before any admit). */
  private prefix = '';
  private readonly gates = new Map<string, number>();
  private readonly rates = new Map<string, { rate: number; burst: number }>();
  private readonly logger = new Logger('GenDurable');
  private lastWarnAt = 0;
  private closed = false;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly namespace: RedisNamespace,
    private readonly connection: RedisConnectionOptions,
    private readonly leaseTtl: number,
  ) {}

  async syncConfig(configs: readonly LimitConfig[]): Promise<void> {
    for (const c of configs) {
      if (c.kind === 'conc') this.gates.set(c.name, c.capacity);
      else this.rates.set(c.name, { rate: c.rate ?? 0, burst: c.capacity });
    }
    this.prefix = await this.namespace.prefix();
    await upsertLimitConfigs(this.sql, configs);
    await this.connect();
  }

  async admit(entries: readonly LimiterEntry[], _queue: string): Promise<AdmitResult> {
    if (entries.length === 0) return { admitted: [], denied: [], throttled: [] };
    try {
      const client = await this.ready();
      let codes = await this.runAdmit(client, entries);
      if (codes === undefined) {
        await this.seed(client);
        codes = await this.runAdmit(client, entries);
        if (codes === undefined) {
          throw new Error('the seed marker vanished again right after seeding');
        }
      }
      const result = this.verdicts(entries, codes);
      await this.mark(result);
      return result;
    } catch (err) {
      this.warn(
        `Redis limiter unavailable, denying ${entries.length} row(s) (they stay runnable): ${String(err)}`,
      );
      return { admitted: [], denied: entries.map((e) => e.id), throttled: [] };
    }
  }

  async credit(slots: readonly LimiterSlot[]): Promise<void> {
    if (slots.length === 0) return;
    try {
      const client = await this.ready();
      const pipeline = client.pipeline();
      const rebuilt = slots.filter((s) => s.holder === undefined);
      for (const s of slots) {
        if (s.holder !== undefined) pipeline.zrem(this.gateKey(s.key), s.holder);
      }
      const results = (await pipeline.exec()) ?? [];
      if (rebuilt.length > 0) {
        await this.command(client, CREDIT_ROW_SCRIPT)(
          rebuilt.length,
          ...rebuilt.map((s) => this.gateKey(s.key)),
          ...rebuilt.map((s) => s.id),
        );
      }
      const failed = results.find(([err]) => err);
      if (failed) throw failed[0] as Error;
    } catch (err) {
      this.warn(
        `Redis credit of ${slots.length} slot(s) dropped; the holders expire with their lease: ${String(err)}`,
      );
    }
  }

  async renew(slots: readonly LimiterSlot[]): Promise<void> {
    if (slots.length === 0) return;
    try {
      const client = await this.ready();
      await this.command(client, RENEW_SCRIPT)(
        slots.length,
        ...slots.map((s) => this.gateKey(s.key)),
        this.leaseTtl,
        ...slots.map((s) => s.holder ?? s.id),
      );
    } catch (err) {
      this.warn(`Redis renew of ${slots.length} slot(s) failed: ${String(err)}`);
    }
  }

  /**
   * Closes gates and buckets until `ms` from now (Redis `TIME`), one CLOSE_SCRIPT run
   * (docs/design.md §16.5); with Redis down it is dropped and logged (the rows still wait).
   */
  async throttle(closures: readonly LimitClosure[]): Promise<void> {
    if (closures.length === 0) return;
    try {
      const client = await this.ready();
      const keys: string[] = [];
      const args: (string | number)[] = [];
      for (const c of closures) {
        keys.push(
          redisKeys.closed(this.prefix, c.kind, c.key),
          c.kind === 'rate' ? redisKeys.rate(this.prefix, c.key) : this.gateKey(c.key),
        );
        const policy = c.kind === 'rate' ? this.rates.get(limitName(c.key)) : undefined;
        const refillMs =
          policy !== undefined && policy.rate > 0
            ? Math.ceil((policy.burst / policy.rate) * 1000) + 1000
            : 3_600_000;
        args.push(c.ms, c.kind, refillMs);
      }
      await this.command(client, CLOSE_SCRIPT)(keys.length, ...keys, ...args);
    } catch (err) {
      this.warn(
        `Redis throttle of ${closures.length} limit(s) failed; the throttled rows still wait their delay: ${String(err)}`,
      );
    }
  }

  /** The live gate and bucket counters, at most `cap` keys of each (the limiters view; throws when Redis is not connected). */
  async counters(cap: number): Promise<RedisCounters> {
    return readRedisCounters(await this.ready(), this.prefix, cap);
  }

  reconcile(): Promise<ReconcileResult> {
    return Promise.resolve({ buckets: 0, gates: 0 });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.connecting?.catch(() => undefined);
    this.client?.disconnect();
    this.client = undefined;
  }

  private async connect(): Promise<void> {
    if (this.client || this.closed) return;
    const { Redis: RedisClass } = await import('ioredis');
    const base: RedisOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: redisRetryDelay,
    };
    const client =
      typeof this.connection === 'string'
        ? new RedisClass(this.connection, base)
        : new RedisClass({ ...base, ...(this.connection as RedisOptions) });
    client.on('error', (err: unknown) => this.warn(`Redis limiter connection: ${String(err)}`));
    for (const s of [ADMIT_SCRIPT, RENEW_SCRIPT, SEED_SCRIPT, CLOSE_SCRIPT, CREDIT_ROW_SCRIPT]) {
      client.defineCommand(s.name, { lua: s.lua });
    }
    this.client = client;
    // Boot waits a little for the first connection; an unreachable Redis only means denials.
    this.connecting = new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        client.off('ready', done);
        resolve();
      };
      const timer = setTimeout(done, CONNECT_WAIT_MS);
      client.once('ready', done);
    });
    await this.connecting;
  }

  private async ready(): Promise<Redis> {
    if (!this.client) await this.connect();
    const client = this.client;
    if (!client || client.status !== 'ready') {
      throw new Error(`Redis is not connected (${client?.status ?? 'closed'})`);
    }
    return client;
  }

  private command(client: Redis, s: RedisScript): ScriptCommand {
    const fn = (client as unknown as Record<string, ScriptCommand | undefined>)[s.name];
    if (!fn) throw new Error(`Redis script ${s.name} is not defined`);
    return fn.bind(client);
  }

  /** One admit script run; undefined when Redis lost its data (no seed marker). */
  private async runAdmit(
    client: Redis,
    entries: readonly LimiterEntry[],
  ): Promise<number[] | undefined> {
    const gateIndex = new Map<string, number>();
    const rateIndex = new Map<string, number>();
    for (const e of entries) {
      if (e.gateKey !== null && !gateIndex.has(e.gateKey)) {
        gateIndex.set(e.gateKey, gateIndex.size + 1);
      }
      if (e.rateKey !== null && !rateIndex.has(e.rateKey)) {
        rateIndex.set(e.rateKey, rateIndex.size + 1);
      }
    }
    const keys = [
      ...[...gateIndex.keys()].map((k) => this.gateKey(k)),
      ...[...rateIndex.keys()].map((k) => redisKeys.rate(this.prefix, k)),
      redisKeys.seed(this.prefix),
      ...[...gateIndex.keys()].map((k) => redisKeys.closed(this.prefix, 'conc', k)),
      ...[...rateIndex.keys()].map((k) => redisKeys.closed(this.prefix, 'rate', k)),
    ];
    const args: (string | number)[] = [gateIndex.size, rateIndex.size, this.leaseTtl];
    for (const key of gateIndex.keys()) args.push(this.gates.get(limitName(key)) ?? 0);
    for (const key of rateIndex.keys()) {
      const policy = this.rates.get(limitName(key));
      args.push(policy?.rate ?? 0, policy?.burst ?? 0);
    }
    args.push(entries.length);
    for (const e of entries) {
      args.push(
        e.holder ?? e.id,
        e.gateKey === null ? 0 : (gateIndex.get(e.gateKey) ?? 0),
        e.rateKey === null ? 0 : (rateIndex.get(e.rateKey) ?? 0),
        e.weight,
      );
    }
    const reply = (await this.command(client, ADMIT_SCRIPT)(
      keys.length,
      ...keys,
      ...args,
    )) as number[];
    if (reply[0] === UNSEEDED) return undefined;
    return reply;
  }

  /**
   * Marks the admitted gated rows in Postgres (shard 1) so a re-seed finds them. If that
   * fails, the Redis holders just added are removed again and the error fails the admit closed.
   */
  private async mark(result: AdmitResult): Promise<void> {
    const slots = result.admitted.flatMap((a) => (a.slot ? [a.slot] : []));
    if (slots.length === 0) return;
    try {
      await MARK_REDIS_ADMITTED.run(this.sql, { ids: slots.map((s) => s.id) });
    } catch (err) {
      await this.credit(slots);
      throw err;
    }
  }

  /**
   * Re-adds the holders Postgres knows (rows marked admitted, so merely claimed rows of any
   * node are not mistaken for holders), then sets the marker, in one script; once at a time.
   * NOTE: a holder admitted in the instant between its Redis admit and its mark is missed:
   * one transient extra admission, the price of not blocking the gate on claimed rows.
   */
  private seed(client: Redis): Promise<void> {
    this.seeding ??= (async () => {
      try {
        const holders = await LIST_GATE_HOLDERS.run(this.sql);
        const keys = [redisKeys.seed(this.prefix), ...holders.map((h) => this.gateKey(h.key))];
        const args = holders.flatMap((h) => [
          gateHolder(h.id, h.claimSeq),
          Math.ceil(h.remainingMs),
        ]);
        await this.command(client, SEED_SCRIPT)(keys.length, ...keys, ...args);
        this.logger.log(`Redis limiter seeded with ${holders.length} gate holder(s) from Postgres`);
      } finally {
        this.seeding = undefined;
      }
    })();
    return this.seeding;
  }

  private verdicts(entries: readonly LimiterEntry[], codes: readonly number[]): AdmitResult {
    const v = new AdmitVerdicts();
    entries.forEach((e, i) => {
      const code = codes[i];
      if (e.gateKey !== null) v.gate(e.gateKey, code !== 2);
      if (e.rateKey !== null && code !== 2) v.rate(e.rateKey, code === 1);
      if (code === 1) {
        const slot = { key: e.gateKey ?? '', shard: 1, id: e.id, holder: e.holder ?? e.id };
        v.admit(e.id, e.gateKey === null ? null : slot);
      } else v.deny(e.id);
    });
    return v.result();
  }

  private gateKey(key: string): string {
    return redisKeys.gate(this.prefix, key);
  }

  private warn(message: string): void {
    const now = Date.now();
    if (now - this.lastWarnAt < WARN_EVERY_MS) return;
    this.lastWarnAt = now;
    this.logger.warn(message);
  }
}
