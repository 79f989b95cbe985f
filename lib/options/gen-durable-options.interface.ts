import type { Type } from '@nestjs/common';
import type { DataSource } from 'typeorm';

import type { DurableStepInterceptor } from '../fsm/step-interceptor';

/** A flusher (group commit) and the queues it serves (docs/design.md §6.2). */
export interface FlusherOptions {
  /** `'all'` or the queue names this flusher commits for. First match wins. Default `'all'`. */
  queues?: 'all' | string[];
  /** Entries per flush transaction at most. Default 500. */
  maxBatch?: number;
  /** How long an idle flusher holds its first entry to gather more, ms. Default 0. */
  maxDelayMs?: number;
}

/** Reaper placement and tuning (docs/design.md §17.2, §26.5); `false` = no reaper on this node. */
export interface ReaperOptions {
  /** ms between sweeps of expired leases and overdue await deadlines. Default 30 000. */
  interval?: number;
  /** Reaps after which a row is failed as a poison pill. Default 5. */
  maxReaps?: number;
}

/** GC placement and tuning (docs/design.md §18); `false` = no GC on this node. */
export interface GcOptions {
  /** ms between sweeps. Default 60 000. */
  interval?: number;
  /** ms a `done` row is kept after it ends. Default 86 400 000 (1 day). */
  retention?: number;
  /** ms a `failed` row is kept after it ends. Default 604 800 000 (7 days). */
  failedRetention?: number;
  /** ms a `cancelled` row is kept after it ends. Default 86 400 000 (1 day). */
  cancelledRetention?: number;
  /** Rows deleted per sweep at most; a full batch sweeps again at once. Default 10 000. */
  batch?: number;
  /**
   * The archive (docs/archive.md): `done` rows move out of the hot table into
   * time partitions of this grain (UTC), dropped whole when their retention ends; `'off'` keeps
   * them in the hot table until GC deletes them. Default `'hour'`.
   */
  archive?: 'hour' | 'day' | 'off';
  /**
   * ms after its end before an ended row is moved to the archive: the instances callers still
   * `await` or `get` right after they end are read from the hot table. Default 60 000.
   */
  archiveAfter?: number;
}

/** Priority aging (docs/operations.md "Priority aging"). */
export interface PriorityAgingOptions {
  /** ms a runnable row waits (due, untouched) before it gains one priority step. Required. */
  after: number;
  /** The most urgent priority aging can give (lower runs first). Default 0. */
  floor?: number;
  /** ms between passes. Default 10 000. */
  interval?: number;
  /** Rows raised per pass at most; a full pass runs again at once. Default 1 000. */
  batch?: number;
}

/** The once-a-minute stats snapshot (docs/design.md §30, docs/dashboard-data.md). */
export interface StatsOptions {
  /** ms between checks that the current minute's snapshot is written (≥ 1 000; above 60 000 minutes go missing). Default 15 000. */
  interval?: number;
  /** ms a snapshot row is kept (≥ 60 000). Default 86 400 000 (1 day). */
  retention?: number;
  /** Each count stops at this many rows. Default 10 000. */
  cap?: number;
}

/** Cron schedules on this node (docs/design.md §29); `false` = no schedule upserted or fired here. */
export interface SchedulesOptions {
  /** At boot, delete declared schedules of this node's FSMs that no class declares any more. Default false. */
  prune?: boolean;
  /** ms at most between two reads of the schedule table (a tick also wakes at the next fire it read). Default 30 000. */
  interval?: number;
  /** How late a fire may be and still count as on time (not missed), ms. Default 1 000. */
  grace?: number;
}

/** OpenTelemetry (docs/design.md §31, docs/observability.md). */
export interface OtelOptions {
  /** `false` = no span, metric or stored trace context, even with a provider registered. Default true. */
  enabled?: boolean;
  /**
   * How a step span relates to the trace context stored with its row: `'parent'` (a child),
   * `'link'` (a new trace linked to it), `'auto'` (a child for the row's first step, a link
   * after). Default `'auto'`.
   */
  traceMode?: 'auto' | 'parent' | 'link';
  /** Also an internal span per claim and per flush. Default false. */
  internalSpans?: boolean;
}

/** The insert batcher of `insertAsync` (and, with `durable`, of awaited inserts). */
export interface InsertBatcherOptions {
  /** Inserts per statement at most. Default 1 000. */
  maxBatch?: number;
  /** ms the first buffered insert waits for more. Default 100. */
  maxDelayMs?: number;
  /**
   * `insertAsync` rows pending in the buffer at most, at least 1. At the cap an `insertAsync`
   * call is not buffered: it inserts durably itself (one statement, awaited) until the buffer
   * drains. Default 10 000. Not "0 = never buffer": to never buffer, leave `insertBatcher` off
   * (`false`, the default), and every `insertAsync` inserts durably.
   */
  maxBuffer?: number;
  /**
   * Coalesce concurrent awaited `insert()` calls into one statement each (group commit, each
   * caller answered after its commit). Default true; without `insertBatcher` too.
   */
  durable?: boolean;
}

/** Caller-side await tuning (docs/design.md §9). */
export interface AwaitOptions {
  /** ms between batched cross-node probes while callers wait. Default 25, ≥ 1. */
  tick?: number;
}

/** A named token bucket (docs/design.md §15). */
export interface RateLimitOptions {
  /** Tokens added per `period`. */
  allowed: number;
  /** Seconds, or `[n, unit]` with unit second/minute/hour/day. */
  period:
    | number
    | [number, 'second' | 'seconds' | 'minute' | 'minutes' | 'hour' | 'hours' | 'day' | 'days'];
  /** Bucket capacity; default `allowed`. */
  burst?: number;
  /** Counter shards; default 1. */
  shards?: number;
}

/** A named concurrency gate (docs/design.md §14). */
export interface ConcurrencyLimitOptions {
  /** Executing holders per key at most (positive integer). */
  limit: number;
  /** Counter shards; default 1, clamped to `limit`. */
  shards?: number;
}

/** Redis connection for the limiter or pokes: a URL or ioredis options. */
export type RedisConnectionOptions = string | Record<string, unknown>;

/** Options of `GenDurableModule.forRoot` / the factory of `forRootAsync` (docs/design.md §22). */
export interface GenDurableOptions {
  /** Engine identity (tokens, telemetry, poke channel, worker ids). Default `'GenDurable'`. */
  name?: string;
  /** An initialized TypeORM DataSource on PostgreSQL. Required. */
  dataSource: DataSource;
  /**
   * An initialized TypeORM DataSource on a streaming replica of `dataSource`'s database:
   * `list`, `count`, `history`, `queueStatus` and the health depth read run there and see the
   * replica's lag; claims, flushes, inserts, signals, control actions and `get` (so `await`)
   * never do (docs/operations.md "Read replicas"). Default: none, every read on `dataSource`.
   */
  readDataSource?: DataSource;
  /** Schema of every gen-durable object. Default `'public'`. */
  schema?: string;
  /** Restricts this engine's registry to these FSM classes or names. Default: all discovered. */
  fsms?: Array<Type<unknown> | string>;
  /**
   * Step interceptors wrapping every step of this engine's FSMs, in order, before each FSM's
   * `@UseStepInterceptors` (docs/interceptors.md): provider classes implementing
   * `DurableStepInterceptor`, resolved from Nest's container at boot. Default `[]`.
   */
  stepInterceptors?: Array<Type<DurableStepInterceptor>>;
  /** Queue → per-node concurrency. Default `{ default: 10 }`; `{}` runs no scheduler (web node). */
  queues?: Record<string, number>;
  /** Named token buckets. Default `{}`. */
  rateLimits?: Record<string, RateLimitOptions>;
  /** Named concurrency gates. Default `{}`. */
  concurrencyLimits?: Record<string, ConcurrencyLimitOptions>;
  /** Limiter backend: `'postgres'` or `{ redis }`. Default `'postgres'`. */
  limiter?: 'postgres' | { redis: RedisConnectionOptions };
  /** ms a claim is leased before the reaper may reclaim it. Default 60 000. */
  leaseTtl?: number;
  /** ms between lease extensions of held rows. Default 20 000. */
  heartbeatInterval?: number;
  /** Base ms between idle polls. Default 1 000. */
  pollInterval?: number;
  /** Idle-backoff ceiling of the poll, ms. Default 5 000. */
  maxPollInterval?: number;
  /**
   * Signed callback URLs (`engine.callbackUrl`, served by `GenDurableCallbacksModule`,
   * docs/callbacks.md): `secret` (≥ 32 characters, the same on every node), `baseUrl` (the public
   * URL of the mounted path), `ttl` (ms a URL stays valid unless `ttlMs` is given: 86 400 000).
   * Default false.
   */
  callbacks?: { secret: string; baseUrl: string; ttl?: number } | false;
  /**
   * Tell the other nodes, over the cross-node poke transport, which instances ended on this
   * node, so their `engine.finished$` sees them (`origin: 'remote'`; best effort). One
   * announcement per flush that ended any. Default false (docs/events.md).
   */
  announceFinished?: boolean;
  /**
   * How runnable work is announced: `'local'`, `'postgres'`, `{ postgres: { connectionString } }`
   * (LISTEN on a direct URL while statements use a pooled DataSource), `{ redis }` or `'none'`.
   * Default `'local'`.
   */
  poke?:
    | 'local'
    | 'postgres'
    | 'none'
    | { postgres: { connectionString: string } }
    | { redis: RedisConnectionOptions };
  /**
   * First part of every Redis key and pub/sub channel of this engine: the Redis limiter's gates
   * (`<prefix>conc:<key>`), buckets (`<prefix>rate:<key>`) and seed marker (`<prefix>seed`), and
   * the Redis poke channel (`<prefix>poke`). Default `gd:<database>/<schema>/<name>:` (each part
   * URI-encoded), so engines on different databases, schemas or names never share one on a
   * shared Redis. Two engine names on one schema that should share gates set the same prefix.
   */
  redisPrefix?: string;
  /** Caller-side await tuning. Default `{ tick: 25 }`. */
  await?: AwaitOptions;
  /** Reaper on this node. Default `{ interval: 30 000, maxReaps: 5 }`. */
  reaper?: ReaperOptions | false;
  /**
   * GC on this node, and the archive's sweep (docs/archive.md). Default `{ interval: 60 000,
   * retention: 86 400 000, failedRetention: 604 800 000, cancelledRetention: 86 400 000,
   * batch: 10 000, archive: 'hour', archiveAfter: 60 000 }`.
   */
  gc?: GcOptions | false;
  /**
   * Priority aging on the GC node (docs/operations.md "Priority aging"): runnable rows that
   * waited `after` ms gain one priority step per `after` ms, up to `floor`. Default `false`.
   */
  priorityAging?: PriorityAgingOptions | false;
  /**
   * The dashboard's once-a-minute per-queue counts (docs/dashboard-data.md), written on a node
   * with a reaper or GC. Default `{ interval: 15 000, retention: 86 400 000, cap: 10 000 }`;
   * `false` = not from this node.
   */
  stats?: StatsOptions | false;
  /**
   * Cron schedules: upsert this node's `@DurableCron` schedules at boot and, on a node that runs
   * queues or maintenance (reaper or GC), fire due ones. Default
   * `{ prune: false, interval: 30 000, grace: 1 000 }`; `false` = neither on this node.
   */
  schedules?: SchedulesOptions | false;
  /**
   * Rows each queue buffers beyond its running slots. Default `'auto'`: max(200, 4 ×
   * concurrency) − concurrency while the queue's recent steps average under 50 ms (max(800, 4 ×
   * concurrency) − concurrency under 2 ms), 0 otherwise (docs/operations.md, "prefetch").
   */
  prefetch?: number | 'auto';
  /**
   * Skip a pick unless this many slots are free (unless idle). Default `'auto'`: half of
   * concurrency + prefetch while the queue prefetches, else 1.
   */
  minDemand?: number | 'auto';
  /**
   * On a queue whose claims are fair (fairness keys) while it prefetches, the running slots kept
   * for rows whose fairness key has no step running, so a new tenant's row starts without waiting
   * for a busy tenant's step to end. Default `'auto'`: 1 from concurrency 10, else 0; at most
   * concurrency − 1 (docs/many-tenants.md, "A slot for new keys").
   */
  newKeySlots?: number | 'auto';
  /**
   * ms boot keeps retrying its statements (schema check, startup reclaim, boot sweeps, limit and
   * schedule seeding) while the database is unreachable; only connection-level errors are
   * retried, so a missing schema still fails at once. Default 60 000.
   */
  bootTimeout?: number;
  /** ms each queue waits for in-flight steps at shutdown. Default 5 000. */
  drainTimeout?: number;
  /** Group-commit flushers. Default `[{ queues: 'all', maxBatch: 500, maxDelayMs: 0 }]`. */
  flushers?: FlusherOptions[];
  /**
   * Insert batcher for `insertAsync` (and group-commit inserts). Default false: `insertAsync`
   * is not buffered, while awaited inserts are still group-committed with the default
   * `maxBatch` (turn that off with `{ durable: false }`).
   */
  insertBatcher?: InsertBatcherOptions | false;
  /**
   * OpenTelemetry spans and metrics, active only while a tracer or meter provider is registered
   * (docs/observability.md). Default `{ enabled: true, traceMode: 'auto', internalSpans: false }`.
   */
  otel?: OtelOptions;
  /** Node identity: worker-id prefix and poke token. Default `GEN_DURABLE_NODE_ID` or the hostname. */
  nodeId?: string;
  /** Named prepared statements. Default true; false behind transaction-pooling proxies. */
  preparedStatements?: boolean;
  /** Client-side timeout of each engine statement, ms. Default 30 000. */
  statementTimeout?: number;
  /** Largest serialized state/result/payload accepted, bytes. Default 1 MiB. */
  maxStateBytes?: number;
}
