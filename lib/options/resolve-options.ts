import { hostname } from 'node:os';
import { inspect } from 'node:util';

import { DataSource } from 'typeorm';

import { DEFAULT_ENGINE_NAME } from '../gen-durable.constants';
import { ConfigurationError } from '../errors/configuration.error';
import type { GenDurableOptions, RateLimitOptions } from './gen-durable-options.interface';
import type { ResolvedFlusher, ResolvedOptions, ResolvedRateLimit } from './resolved-options';

const TOP_LEVEL_KEYS = new Set([
  'name',
  'dataSource',
  'schema',
  'fsms',
  'queues',
  'rateLimits',
  'concurrencyLimits',
  'limiter',
  'leaseTtl',
  'heartbeatInterval',
  'pollInterval',
  'maxPollInterval',
  'poke',
  'await',
  'reaper',
  'gc',
  'prefetch',
  'minDemand',
  'drainTimeout',
  'flushers',
  'insertBatcher',
  'nodeId',
  'preparedStatements',
  'statementTimeout',
  'maxStateBytes',
  'isGlobal',
]);

const PERIOD_SECONDS: Record<string, number> = {
  second: 1,
  seconds: 1,
  minute: 60,
  minutes: 60,
  hour: 3600,
  hours: 3600,
  day: 86400,
  days: 86400,
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkKeys(path: string, value: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ConfigurationError(
        `${path}.${key}`,
        `unknown option (expected one of: ${allowed.join(', ')})`,
      );
    }
  }
}

function integer(path: string, value: unknown, fallback: number, min = 0): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ConfigurationError(path, `must be an integer ≥ ${min}, got ${inspect(value)}`);
  }
  return value;
}

function positive(path: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigurationError(path, `must be a positive number, got ${String(value)}`);
  }
  return value;
}

function ioredisAvailable(): boolean {
  try {
    require.resolve('ioredis');
    return true;
  } catch {
    return false;
  }
}

function redisShape(
  path: string,
  value: Record<string, unknown>,
): { redis: string | Record<string, unknown> } {
  checkKeys(path, value, ['redis']);
  const redis = value['redis'];
  if (typeof redis !== 'string' && !isPlainObject(redis)) {
    throw new ConfigurationError(`${path}.redis`, 'must be a redis URL or ioredis options object');
  }
  if (!ioredisAvailable()) {
    throw new ConfigurationError(
      path,
      "Redis mode needs the optional peer 'ioredis': npm install ioredis",
    );
  }
  return { redis };
}

function periodSeconds(path: string, period: RateLimitOptions['period']): number {
  if (typeof period === 'number') return positive(path, period);
  if (Array.isArray(period) && period.length === 2) {
    const [n, unit] = period;
    const factor = PERIOD_SECONDS[unit];
    if (factor === undefined) {
      throw new ConfigurationError(`${path}[1]`, `unknown unit ${String(unit)}`);
    }
    return positive(`${path}[0]`, n) * factor;
  }
  throw new ConfigurationError(path, 'must be seconds or [n, unit]');
}

/**
 * Applies defaults and validates options (SPEC §22). Throws ConfigurationError naming the
 * offending path before anything is started. The result is deeply frozen.
 */
export function resolveOptions(raw: GenDurableOptions): ResolvedOptions {
  if (!isPlainObject(raw)) throw new ConfigurationError('options', 'must be an object');
  const options = raw as unknown as Record<string, unknown>;
  checkKeys('options', options, [...TOP_LEVEL_KEYS]);

  const name = raw.name ?? DEFAULT_ENGINE_NAME;
  if (typeof name !== 'string' || name.length === 0) {
    throw new ConfigurationError('name', 'must be a non-empty string');
  }
  if (!(raw.dataSource instanceof DataSource) && !isPlainObject(raw.dataSource)) {
    throw new ConfigurationError('dataSource', 'an initialized TypeORM DataSource is required');
  }
  if (raw.dataSource.options?.type !== 'postgres') {
    throw new ConfigurationError(
      'dataSource',
      `must be a PostgreSQL DataSource (type 'postgres'), got ${String(raw.dataSource.options?.type)}`,
    );
  }
  if (raw.dataSource.isInitialized !== true) {
    throw new ConfigurationError(
      'dataSource',
      'is not initialized: call dataSource.initialize() before the module boots (or inject the one @nestjs/typeorm provides)',
    );
  }
  const schema = raw.schema ?? 'public';
  if (typeof schema !== 'string' || schema.length === 0) {
    throw new ConfigurationError('schema', 'must be a non-empty string');
  }

  const queues: Record<string, number> = {};
  const rawQueues = raw.queues ?? { default: 10 };
  if (!isPlainObject(rawQueues)) {
    throw new ConfigurationError('queues', 'must be an object of queue → concurrency');
  }
  for (const [queue, concurrency] of Object.entries(rawQueues)) {
    queues[queue] = integer(`queues.${queue}`, concurrency, 0, 1);
  }

  const leaseTtl = integer('leaseTtl', raw.leaseTtl, 60_000, 1);
  const heartbeatInterval = integer('heartbeatInterval', raw.heartbeatInterval, 20_000, 1);
  if (heartbeatInterval >= leaseTtl) {
    throw new ConfigurationError(
      'heartbeatInterval',
      `must be below leaseTtl (${leaseTtl} ms); keep 3 × heartbeatInterval ≲ leaseTtl`,
    );
  }
  const pollInterval = integer('pollInterval', raw.pollInterval, 1_000, 1);
  const maxPollInterval = Math.max(
    pollInterval,
    integer('maxPollInterval', raw.maxPollInterval, 5_000, 1),
  );

  let poke: ResolvedOptions['poke'] = 'local';
  if (raw.poke !== undefined) {
    if (raw.poke === 'local' || raw.poke === 'postgres' || raw.poke === 'none') poke = raw.poke;
    else if (isPlainObject(raw.poke)) poke = redisShape('poke', raw.poke);
    else {
      throw new ConfigurationError(
        'poke',
        `must be 'local', 'postgres', 'none' or { redis }, got ${String(raw.poke)}`,
      );
    }
  }
  let limiter: ResolvedOptions['limiter'] = 'postgres';
  if (raw.limiter !== undefined) {
    if (raw.limiter === 'postgres') limiter = 'postgres';
    else if (isPlainObject(raw.limiter)) limiter = redisShape('limiter', raw.limiter);
    else {
      throw new ConfigurationError(
        'limiter',
        `must be 'postgres' or { redis }, got ${String(raw.limiter)}`,
      );
    }
  }

  if ((raw.await as unknown) === false) throw new ConfigurationError('await', 'cannot be disabled');
  const rawAwait = raw.await ?? {};
  if (!isPlainObject(rawAwait)) throw new ConfigurationError('await', 'must be { tick }');
  checkKeys('await', rawAwait, ['tick']);
  const awaitOptions = { tick: integer('await.tick', rawAwait['tick'], 25, 1) };

  let reaper: ResolvedOptions['reaper'] = { interval: 30_000, maxReaps: 5 };
  if (raw.reaper === false) reaper = false;
  else if (raw.reaper !== undefined) {
    if (!isPlainObject(raw.reaper)) {
      throw new ConfigurationError('reaper', 'must be { interval, maxReaps } or false');
    }
    checkKeys('reaper', raw.reaper, ['interval', 'maxReaps']);
    reaper = {
      interval: integer('reaper.interval', raw.reaper.interval, 30_000, 1),
      maxReaps: integer('reaper.maxReaps', raw.reaper.maxReaps, 5, 1),
    };
  }
  let gc: ResolvedOptions['gc'] = { interval: 60_000, retention: 86_400_000, batch: 10_000 };
  if (raw.gc === false) gc = false;
  else if (raw.gc !== undefined) {
    if (!isPlainObject(raw.gc)) {
      throw new ConfigurationError('gc', 'must be { interval, retention, batch } or false');
    }
    checkKeys('gc', raw.gc, ['interval', 'retention', 'batch']);
    gc = {
      interval: integer('gc.interval', raw.gc.interval, 60_000, 1),
      retention: integer('gc.retention', raw.gc.retention, 86_400_000, 0),
      batch: integer('gc.batch', raw.gc.batch, 10_000, 1),
    };
  }

  const rawFlushers = raw.flushers ?? [{ queues: 'all' as const }];
  if (!Array.isArray(rawFlushers) || rawFlushers.length === 0) {
    throw new ConfigurationError('flushers', 'must be a non-empty array');
  }
  const flushers: ResolvedFlusher[] = rawFlushers.map((f, i) => {
    if (!isPlainObject(f)) throw new ConfigurationError(`flushers[${i}]`, 'must be an object');
    checkKeys(`flushers[${i}]`, f, ['queues', 'maxBatch', 'maxDelayMs']);
    const q = f.queues ?? 'all';
    if (q !== 'all' && !(Array.isArray(q) && q.every((x) => typeof x === 'string'))) {
      throw new ConfigurationError(
        `flushers[${i}].queues`,
        "must be 'all' or an array of queue names",
      );
    }
    return Object.freeze({
      queues: q === 'all' ? 'all' : Object.freeze([...q]),
      maxBatch: integer(`flushers[${i}].maxBatch`, f.maxBatch, 500, 1),
      maxDelayMs: integer(`flushers[${i}].maxDelayMs`, f.maxDelayMs, 0, 0),
    });
  });
  for (const queue of Object.keys(queues)) {
    if (!flushers.some((f) => f.queues === 'all' || f.queues.includes(queue))) {
      throw new ConfigurationError('flushers', `no flusher covers local queue "${queue}"`);
    }
  }

  const rateLimits: Record<string, ResolvedRateLimit> = {};
  for (const [limitName, spec] of Object.entries(raw.rateLimits ?? {})) {
    const path = `rateLimits.${limitName}`;
    if (!isPlainObject(spec)) {
      throw new ConfigurationError(path, 'must be { allowed, period, burst?, shards? }');
    }
    checkKeys(path, spec, ['allowed', 'period', 'burst', 'shards']);
    const allowed = positive(`${path}.allowed`, spec.allowed);
    const seconds = periodSeconds(`${path}.period`, spec.period);
    const burst = spec.burst === undefined ? allowed : positive(`${path}.burst`, spec.burst);
    rateLimits[limitName] = Object.freeze({
      name: limitName,
      rate: allowed / seconds,
      burst,
      shards: Math.max(1, integer(`${path}.shards`, spec.shards, 1, 0)),
    });
  }
  const concurrencyLimits: Record<string, { name: string; limit: number; shards: number }> = {};
  for (const [gateName, spec] of Object.entries(raw.concurrencyLimits ?? {})) {
    const path = `concurrencyLimits.${gateName}`;
    if (!isPlainObject(spec)) throw new ConfigurationError(path, 'must be { limit, shards? }');
    checkKeys(path, spec, ['limit', 'shards']);
    const limit = spec.limit;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
      throw new ConfigurationError(
        `${path}.limit`,
        `must be a positive integer, got ${String(limit)}`,
      );
    }
    const shards = Math.min(limit, Math.max(1, integer(`${path}.shards`, spec.shards, 1, 0)));
    concurrencyLimits[gateName] = Object.freeze({ name: gateName, limit, shards });
  }

  let insertBatcher: ResolvedOptions['insertBatcher'] = false;
  if (raw.insertBatcher !== undefined && raw.insertBatcher !== false) {
    if (!isPlainObject(raw.insertBatcher)) {
      throw new ConfigurationError('insertBatcher', 'must be an object or false');
    }
    checkKeys('insertBatcher', raw.insertBatcher, [
      'maxBatch',
      'maxDelayMs',
      'maxBuffer',
      'durable',
    ]);
    if (raw.insertBatcher.durable !== undefined && typeof raw.insertBatcher.durable !== 'boolean') {
      throw new ConfigurationError(
        'insertBatcher.durable',
        `must be a boolean, got ${String(raw.insertBatcher.durable)}`,
      );
    }
    insertBatcher = Object.freeze({
      maxBatch: integer('insertBatcher.maxBatch', raw.insertBatcher.maxBatch, 1000, 1),
      maxDelayMs: integer('insertBatcher.maxDelayMs', raw.insertBatcher.maxDelayMs, 100, 0),
      maxBuffer: integer('insertBatcher.maxBuffer', raw.insertBatcher.maxBuffer, 10_000, 1),
      durable: raw.insertBatcher.durable === true,
    });
  }

  const nodeId = raw.nodeId ?? process.env['GEN_DURABLE_NODE_ID'] ?? hostname();
  if (typeof nodeId !== 'string' || nodeId.length === 0) {
    throw new ConfigurationError('nodeId', 'must be a non-empty string');
  }

  const prefetch = integer('prefetch', raw.prefetch, 0, 0);
  if (raw.preparedStatements !== undefined && typeof raw.preparedStatements !== 'boolean') {
    // A string 'false' would otherwise be truthy: never a silent default (RELIABILITY S38).
    throw new ConfigurationError(
      'preparedStatements',
      `must be a boolean, got ${inspect(raw.preparedStatements)}`,
    );
  }
  const resolved: ResolvedOptions = {
    name,
    dataSource: raw.dataSource,
    schema,
    fsms: raw.fsms === undefined ? undefined : Object.freeze([...raw.fsms]),
    queues: Object.freeze(queues),
    rateLimits: Object.freeze(rateLimits),
    concurrencyLimits: Object.freeze(concurrencyLimits),
    limiter,
    leaseTtl,
    heartbeatInterval,
    pollInterval,
    maxPollInterval,
    poke,
    await: Object.freeze(awaitOptions),
    reaper: reaper === false ? false : Object.freeze(reaper),
    gc: gc === false ? false : Object.freeze(gc),
    prefetch,
    minDemand: integer('minDemand', raw.minDemand, 1, 1),
    drainTimeout: integer('drainTimeout', raw.drainTimeout, 5_000, 0),
    flushers: Object.freeze(flushers),
    insertBatcher,
    nodeId,
    preparedStatements: raw.preparedStatements ?? true,
    statementTimeout: integer('statementTimeout', raw.statementTimeout, 30_000, 1),
    maxStateBytes: integer('maxStateBytes', raw.maxStateBytes, 1024 * 1024, 1),
  };
  return Object.freeze(resolved);
}
