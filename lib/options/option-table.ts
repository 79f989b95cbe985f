import { hostname } from 'node:os';

import type { Type } from '@nestjs/common';
import { DataSource } from 'typeorm';

import { ConfigurationError } from '../errors/configuration.error';
import { DEFAULT_ENGINE_NAME } from '../gen-durable.constants';
import { keyed, list, section } from './component-options';
import type { GenDurableOptions } from './gen-durable-options.interface';
import type { DurableStepInterceptor } from '../fsm/step-interceptor';
import { isPlainObject } from './option-declaration';
import { parsePoke } from './poke-mode';
import { periodSeconds } from './rate-period';
import type { ResolvedConcurrencyLimit, ResolvedRateLimit } from './resolved-components';
import {
  REQUIRED,
  choice,
  computed,
  custom,
  duration,
  flag,
  integer,
  integerOrAuto,
  positiveNumber,
  text,
} from './scalar-options';

/*
 * Every option of GenDurableModule, declared once: its kind (validation), default and doc line.
 * The resolver, the unknown-key checks, `ResolvedOptions` and the README's configuration table
 * all come from here: test/unit/options-table.spec.ts checks the README table, and
 * test/unit/options-docs.spec.ts the defaults that docs/*.md, README.md and the JSDoc of
 * gen-durable-options.interface.ts quote ("`leaseTtl` (default 60 s)", "Default 60 000.").
 *
 * To add an option:
 *   1. Add the field, with its JSDoc ("Default …"), to GenDurableOptions in
 *      gen-durable-options.interface.ts. `tsc` fails until this table has the same keys.
 *   2. Add one entry below, in the place it should take in the README table: a kind from
 *      scalar-options.ts (integer, duration, positiveNumber, text, flag, choice, custom) or
 *      component-options.ts (section, keyed, list), its default and a one-line `doc`.
 *      `ResolvedOptions[name]` is typed from the entry; nothing else changes for a consumer.
 *      A component's `doc` may say `{defaults}`, which the README shows as its fields' defaults.
 *   3. Run `npx jest test/unit/options-` (no database): options-table prints the README table to
 *      paste into README.md's Configuration section (then `npx prettier --write README.md`),
 *      options-docs names any JSDoc or doc line whose quoted default disagrees.
 * A field of a component (`reaper`, `gc`, a flusher…) is one entry in that section's `fields`
 * plus its JSDoc'd field in the matching interface (ReaperOptions…); options-docs checks both.
 * A rule across several options (one must be below another…) goes in option-rules.ts.
 */

const flusher = section({
  doc: 'a group-commit flusher and the queues it commits for',
  fields: {
    queues: custom({
      doc: "`'all'` or the queue names this flusher commits for; first match wins",
      default: { value: 'all' as const },
      parse: (raw, path): 'all' | readonly string[] => {
        if (raw === 'all') return 'all';
        if (Array.isArray(raw) && raw.every((x) => typeof x === 'string')) {
          return Object.freeze([...raw]);
        }
        throw new ConfigurationError(path, "must be 'all' or an array of queue names");
      },
    }),
    maxBatch: integer({ doc: 'entries per flush transaction at most', min: 1, default: 500 }),
    maxDelayMs: duration({
      doc: 'how long an idle flusher holds its first entry to gather more',
      min: 0,
      default: 0,
    }),
  },
});

const rateLimit = section({
  doc: 'a named token bucket',
  fields: {
    allowed: positiveNumber({ doc: 'tokens added per `period`', default: REQUIRED }),
    period: custom({
      doc: 'seconds, or `[n, unit]` with unit second/minute/hour/day',
      default: REQUIRED,
      parse: periodSeconds,
    }),
    burst: positiveNumber({
      doc: 'bucket capacity',
      default: computed('`allowed`', () => undefined),
    }),
    shards: integer({ doc: 'counter shards (at least 1)', min: 0, default: 1 }),
  },
  finish: (v, _path, name): ResolvedRateLimit => ({
    name,
    rate: v.allowed / v.period,
    burst: v.burst ?? v.allowed,
    shards: Math.max(1, v.shards),
  }),
});

const concurrencyLimit = section({
  doc: 'a named concurrency gate',
  fields: {
    limit: integer({ doc: 'executing holders per key at most', min: 1, default: REQUIRED }),
    shards: integer({ doc: 'counter shards, at most `limit`', min: 0, default: 1 }),
  },
  finish: (v, _path, name): ResolvedConcurrencyLimit => ({
    name,
    limit: v.limit,
    shards: Math.min(v.limit, Math.max(1, v.shards)),
  }),
});

export const OPTION_TABLE = {
  name: text({
    doc: 'engine identity: injection token, telemetry, poke channel, worker ids. Several engines per process need distinct names; inject a named one with `@InjectEngine(name)`',
    default: DEFAULT_ENGINE_NAME,
  }),
  dataSource: custom({
    doc: 'an initialized TypeORM PostgreSQL `DataSource`; the engine runs on its `pg` pool',
    default: REQUIRED,
    parse: (raw, path): DataSource => parseDataSource(raw, path),
  }),
  readDataSource: custom({
    doc: 'an initialized TypeORM PostgreSQL `DataSource` on a streaming replica: `list`, `count`, `history`, `queueStatus` and the health depth read run there and may lag; never claims, writes, signals or `get` ([operations](docs/operations.md#read-replicas))',
    default: computed('none: every read on `dataSource`', () => undefined),
    parse: (raw, path): DataSource => parseDataSource(raw, path),
  }),
  schema: text({ doc: 'schema of every gen-durable object', default: 'public' }),
  fsms: custom({
    doc: 'restrict this engine to these FSM classes or names',
    default: computed('all discovered', () => undefined),
    parse: (raw, path): readonly (Type<unknown> | string)[] => {
      if (
        !Array.isArray(raw) ||
        !raw.every((f) => typeof f === 'function' || typeof f === 'string')
      ) {
        throw new ConfigurationError(path, 'must be an array of FSM classes or names');
      }
      return Object.freeze([...(raw as (Type<unknown> | string)[])]);
    },
  }),
  stepInterceptors: custom({
    doc: "provider classes implementing `DurableStepInterceptor` that wrap every step, before each FSM's `@UseStepInterceptors` ([interceptors](docs/interceptors.md))",
    default: { value: Object.freeze([]) as readonly Type<DurableStepInterceptor>[] },
    parse: (raw, path): readonly Type<DurableStepInterceptor>[] => {
      if (!Array.isArray(raw) || !raw.every((c) => typeof c === 'function')) {
        throw new ConfigurationError(path, 'must be an array of interceptor classes');
      }
      return Object.freeze([...(raw as Type<DurableStepInterceptor>[])]);
    },
  }),
  queues: keyed({
    doc: 'queue → per-node concurrency; `{}` runs no scheduler (a web node)',
    shape: 'queue → concurrency',
    entry: integer({
      doc: 'steps of this queue running at once on this node',
      min: 1,
      default: REQUIRED,
    }),
    default: { default: 10 },
  }),
  rateLimits: keyed({
    doc: '`{ name: { allowed, period, burst?, shards? } }`, token buckets ([rate limiting](docs/rate-limiting.md))',
    shape: 'name → { allowed, period, burst?, shards? }',
    entry: rateLimit,
    default: {},
  }),
  concurrencyLimits: keyed({
    doc: '`{ name: { limit, shards? } }`, gates for `concurrencyKey`s ([concurrency](docs/concurrency.md))',
    shape: 'name → { limit, shards? }',
    entry: concurrencyLimit,
    default: {},
  }),
  limiter: choice({
    doc: "limiter backend: `'postgres'` or `{ redis: url | ioredisOptions }`",
    values: ['postgres'],
    orRedis: true,
    default: 'postgres',
  }),
  leaseTtl: duration({
    doc: 'how long a claim is leased before the reaper may take it back',
    min: 1,
    default: 60_000,
  }),
  heartbeatInterval: duration({
    doc: 'lease extension period; keep 3 × `heartbeatInterval` ≲ `leaseTtl`',
    min: 1,
    default: 20_000,
  }),
  pollInterval: duration({ doc: 'base poll period of an idle queue', min: 1, default: 1_000 }),
  maxPollInterval: duration({
    doc: 'idle-backoff ceiling of the poll (at least `pollInterval`)',
    min: 1,
    default: 5_000,
  }),
  poke: custom({
    doc: "how new work is announced: `'local'`, `'postgres'` (LISTEN/NOTIFY on a connection like the pool's), `{ postgres: { connectionString } }` (LISTEN on that direct URL, for a pooled DataSource), `{ redis }`, `'none'` ([operations](docs/operations.md))",
    default: { value: 'local' as const },
    parse: parsePoke,
  }),
  announceFinished: flag({
    doc: "tell the other nodes, over the cross-node poke (`'postgres'` or `{ redis }`), which instances ended here, for their `engine.finished$`: one announcement per flush that ended any ([events](docs/events.md))",
    default: false,
  }),
  callbacks: section({
    doc: '`{ secret, baseUrl, ttl }` for `engine.callbackUrl` and `GenDurableCallbacksModule`: the HMAC secret (≥ 32 characters), the public URL of the mounted callbacks path, the default validity in ms ([callbacks](docs/callbacks.md)); `false` = none',
    off: 'by-default',
    fields: {
      secret: custom({
        doc: 'HMAC-SHA256 key of callback tokens; keep it secret, the same on every node',
        default: REQUIRED,
        parse: (raw, path): string => {
          if (typeof raw !== 'string' || raw.length < 32) {
            throw new ConfigurationError(path, 'must be a string of at least 32 characters');
          }
          return raw;
        },
      }),
      baseUrl: custom({
        doc: "the public URL the callbacks module is mounted at, e.g. `'https://api.example.com/durable/callbacks'`",
        default: REQUIRED,
        parse: (raw, path): string => {
          if (typeof raw !== 'string' || !URL.canParse(raw)) {
            throw new ConfigurationError(path, 'must be an absolute URL');
          }
          return raw;
        },
      }),
      ttl: duration({
        doc: 'ms a callback URL stays valid by default',
        min: 1,
        default: 86_400_000,
      }),
    },
  }),
  redisPrefix: custom({
    doc: 'first part of every Redis key and pub/sub channel of this engine (limiter gates, buckets, seed marker, pokes); the default keeps engines on different databases, schemas or names apart on one Redis ([operations](docs/operations.md#sharing-one-redis))',
    default: computed('`gd:<database>/<schema>/<name>:`', () => undefined),
    parse: (raw, path): string => {
      if (typeof raw !== 'string' || raw.length === 0) {
        throw new ConfigurationError(path, 'must be a non-empty string');
      }
      return raw;
    },
  }),
  await: section({
    doc: 'caller-side `await`: cross-node probe period while someone waits (≥ 1)',
    fields: {
      tick: duration({
        doc: 'ms between batched cross-node probes while callers wait',
        min: 1,
        default: 25,
      }),
    },
  }),
  reaper: section({
    doc: 'expired-lease and await-timeout sweeps; `maxReaps` fails a row that keeps killing its worker; `false` = none on this node',
    off: 'allowed',
    fields: {
      interval: duration({
        doc: 'ms between sweeps of expired leases and overdue await deadlines',
        min: 1,
        default: 30_000,
      }),
      maxReaps: integer({
        doc: 'reaps after which a row is failed as a poison pill',
        min: 1,
        default: 5,
      }),
    },
  }),
  gc: section({
    doc: 'deletes ended rows after their retention (`@DurableFsm({ retention })` overrides per FSM), moves ended rows to the archive and drops its expired partitions ([archive](docs/archive.md)), prunes limiter counters; `false` = none on this node ([operations](docs/operations.md#garbage-collection))',
    off: 'allowed',
    fields: {
      interval: duration({ doc: 'ms between sweeps', min: 1, default: 60_000 }),
      retention: duration({
        doc: 'ms a `done` row is kept after it ends',
        min: 0,
        default: 86_400_000,
      }),
      failedRetention: duration({
        doc: 'ms a `failed` row is kept after it ends (longer, to be looked at and retried)',
        min: 0,
        default: 604_800_000,
      }),
      cancelledRetention: duration({
        doc: 'ms a `cancelled` row is kept after it ends',
        min: 0,
        default: 86_400_000,
      }),
      batch: integer({
        doc: 'rows deleted per sweep at most; a full batch sweeps again at once',
        min: 1,
        default: 10_000,
      }),
      archive: choice({
        doc: "`done` rows move out of the hot table into time partitions of this grain (UTC), each dropped whole once every row in it is past its retention; `'off'` keeps them in the hot table until deleted ([archive](docs/archive.md))",
        values: ['hour', 'day', 'off'],
        default: 'hour',
      }),
      archiveAfter: duration({
        doc: 'ms after its end before an ended row is moved to the archive: the instances callers still `await` or `get` right after they end are read from the hot table',
        min: 0,
        default: 60_000,
      }),
    },
  }),
  priorityAging: section({
    doc: 'on the GC node, runnable rows that waited `after` ms gain one priority step (lower runs first) per `after` ms of waiting, up to `floor`, so low-priority work cannot starve behind a steady urgent stream; the claim is unchanged; `false` = none ([operations](docs/operations.md#priority-aging))',
    off: 'by-default',
    fields: {
      after: integer({
        doc: 'ms a runnable row waits (due and untouched) before it gains one priority step',
        min: 1,
        unit: 'ms',
        default: REQUIRED,
      }),
      floor: integer({
        doc: 'the most urgent priority aging can give',
        min: -32_768,
        default: 0,
      }),
      interval: duration({ doc: 'ms between passes', min: 1, default: 10_000 }),
      batch: integer({
        doc: 'rows raised per pass at most; a full pass runs again at once',
        min: 1,
        default: 1_000,
      }),
    },
  }),
  stats: section({
    doc: "once-a-minute per-queue counts in gen_durable_stats for the dashboard's overview, written by the first maintenance node (reaper or GC on) to reach each minute, paced to 1 % of the node's time after a slow write ([dashboard data](docs/dashboard-data.md)); `false` = none from this node",
    off: 'allowed',
    fields: {
      interval: duration({
        doc: "ms between this node's checks that the current minute's snapshot is written (a written minute costs one index probe); above 60 000 minutes go missing",
        min: 1_000,
        default: 15_000,
      }),
      retention: duration({
        doc: 'ms a snapshot row is kept',
        min: 60_000,
        default: 86_400_000,
      }),
      cap: integer({
        doc: 'each count of a snapshot stops at this many rows (a capped count is listed as such)',
        min: 1,
        default: 10_000,
      }),
    },
  }),
  schedules: section({
    doc: 'cron schedules: this node upserts its `@DurableCron` schedules at boot and, when it runs queues or maintenance, fires due ones; `false` = neither on this node',
    off: 'allowed',
    fields: {
      prune: flag({
        doc: "at boot, delete declared schedules of this node's FSMs that no class declares any more",
        default: false,
      }),
      interval: duration({
        doc: 'ms at most between two reads of the schedule table (a tick also wakes at the next fire it read)',
        min: 1,
        default: 30_000,
      }),
      grace: duration({
        doc: 'how late a fire may be and still count as on time, not missed',
        min: 0,
        default: 1_000,
      }),
    },
  }),
  prefetch: integerOrAuto({
    doc: "rows each queue claims beyond its free slots; `'auto'`: max(200, 4 × concurrency) − concurrency while steps average < 50 ms (max(800, 4 × concurrency) − concurrency < 2 ms), else 0 ([operations](docs/operations.md))",
    min: 0,
  }),
  minDemand: integerOrAuto({
    doc: "skip a pick unless this many rows are wanted (unless idle); `'auto'`: half of concurrency + prefetch while prefetching, else 1",
    min: 1,
  }),
  newKeySlots: integerOrAuto({
    doc: "on a fair queue while it prefetches, running slots kept for rows whose fairness key has no step running; `'auto'`: 1 from concurrency 10, else 0 ([many tenants](docs/many-tenants.md#a-slot-for-new-keys))",
    min: 0,
  }),
  bootTimeout: duration({
    doc: 'how long boot retries its statements while the database is unreachable (connection-level errors only; a missing schema fails at once)',
    min: 0,
    default: 60_000,
  }),
  drainTimeout: duration({
    doc: 'how long shutdown waits for in-flight steps',
    min: 0,
    default: 5_000,
  }),
  flushers: list({
    doc: 'group-commit flushers; first match wins; every local queue must be covered',
    entry: flusher,
    default: [{}],
  }),
  insertBatcher: section({
    doc: '`{defaults}` for `insertAsync`; unset too, awaited `insert()` calls are group-committed (`durable`), each answered after its commit ([performance](docs/performance.md#group-commit-inserts))',
    off: 'by-default',
    fields: {
      maxBatch: integer({ doc: 'inserts per statement at most', min: 1, default: 1000 }),
      maxDelayMs: duration({
        doc: 'how long the first buffered insert waits for more',
        min: 0,
        default: 100,
      }),
      maxBuffer: integer({
        doc: '`insertAsync` rows pending at most (≥ 1); at the cap `insertAsync` inserts durably itself; to never buffer, leave `insertBatcher` off',
        min: 1,
        default: 10_000,
      }),
      durable: flag({
        doc: 'also coalesce awaited `insert()` calls (group-commit inserts); `false` = each awaited insert its own statement',
        default: true,
      }),
    },
  }),
  otel: section({
    doc: 'OpenTelemetry spans and metrics through the optional `@opentelemetry/api` peer, active only while a provider is registered ([observability](docs/observability.md))',
    fields: {
      enabled: flag({
        doc: '`false` = no span, no metric, no trace context stored, even with a provider registered',
        default: true,
      }),
      traceMode: choice({
        doc: "how a step span relates to the stored trace context: `'parent'` (child), `'link'`, `'auto'` (child for the first step, link after)",
        values: ['auto', 'parent', 'link'],
        default: 'auto',
      }),
      internalSpans: flag({
        doc: 'also an internal span per claim and per flush',
        default: false,
      }),
    },
  }),
  nodeId: text({
    doc: "node part of worker ids and of the node's liveness lock; a restarted process with the same id takes back its predecessor's claims at boot ([operations](docs/operations.md#crash-recovery))",
    default: computed(
      '`GEN_DURABLE_NODE_ID` or the hostname',
      () => process.env['GEN_DURABLE_NODE_ID'] ?? hostname(),
    ),
  }),
  preparedStatements: flag({
    doc: 'named prepared statements; `false` behind transaction-pooling proxies',
    default: true,
  }),
  statementTimeout: duration({
    doc: 'client-side timeout of every engine statement',
    min: 1,
    default: 30_000,
  }),
  maxStateBytes: integer({
    doc: 'largest serialized state, result or signal payload',
    min: 1,
    default: 1024 * 1024,
    unit: 'bytes',
  }),
};

/**
 * The table and GenDurableOptions name the same options: a key missing on either side makes
 * this line fail to compile, and the error names the key.
 */
export const OPTION_TABLE_MATCHES_PUBLIC_OPTIONS: [
  Exclude<keyof GenDurableOptions, keyof typeof OPTION_TABLE>,
  Exclude<keyof typeof OPTION_TABLE, keyof GenDurableOptions>,
] extends [never, never]
  ? true
  : {
      notInTable: Exclude<keyof GenDurableOptions, keyof typeof OPTION_TABLE>;
      notInGenDurableOptions: Exclude<keyof typeof OPTION_TABLE, keyof GenDurableOptions>;
    } = true;

/**
 * Options the Nest module itself reads (ConfigurableModuleBuilder extras): accepted and checked
 * beside the table's, documented in the same README table, but not part of ResolvedOptions.
 */
export const MODULE_OPTION_TABLE = {
  isGlobal: flag({ doc: 'register the module globally', default: true }),
};

export type OptionTable = typeof OPTION_TABLE;

/** An initialized TypeORM DataSource on PostgreSQL (`dataSource`, `readDataSource`). */
function parseDataSource(raw: unknown, path: string): DataSource {
  if (!(raw instanceof DataSource) && !isPlainObject(raw)) {
    throw new ConfigurationError(path, 'an initialized TypeORM DataSource is required');
  }
  const dataSource = raw as DataSource;
  if (dataSource.options?.type !== 'postgres') {
    throw new ConfigurationError(
      path,
      `must be a PostgreSQL DataSource (type 'postgres'), got ${String(dataSource.options?.type)}`,
    );
  }
  if (dataSource.isInitialized !== true) {
    throw new ConfigurationError(
      path,
      'is not initialized: call dataSource.initialize() before the module boots (or inject the one @nestjs/typeorm provides)',
    );
  }
  return dataSource;
}
