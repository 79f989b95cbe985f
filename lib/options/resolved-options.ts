import type { Type } from '@nestjs/common';
import type { DataSource } from 'typeorm';

import type { RedisConnectionOptions } from './gen-durable-options.interface';

export interface ResolvedFlusher {
  readonly queues: 'all' | readonly string[];
  readonly maxBatch: number;
  readonly maxDelayMs: number;
}

export interface ResolvedRateLimit {
  readonly name: string;
  /** tokens per second */
  readonly rate: number;
  readonly burst: number;
  readonly shards: number;
}

export interface ResolvedConcurrencyLimit {
  readonly name: string;
  readonly limit: number;
  readonly shards: number;
}

/** Options after defaults and validation; frozen. */
export interface ResolvedOptions {
  readonly name: string;
  readonly dataSource: DataSource;
  readonly schema: string;
  readonly fsms: readonly (Type<unknown> | string)[] | undefined;
  readonly queues: Readonly<Record<string, number>>;
  readonly rateLimits: Readonly<Record<string, ResolvedRateLimit>>;
  readonly concurrencyLimits: Readonly<Record<string, ResolvedConcurrencyLimit>>;
  readonly limiter: 'postgres' | { readonly redis: RedisConnectionOptions };
  readonly leaseTtl: number;
  readonly heartbeatInterval: number;
  readonly pollInterval: number;
  readonly maxPollInterval: number;
  readonly poke: 'local' | 'postgres' | 'none' | { readonly redis: RedisConnectionOptions };
  readonly await: { readonly tick: number };
  readonly reaper: false | { readonly interval: number; readonly maxReaps: number };
  readonly gc:
    false | { readonly interval: number; readonly retention: number; readonly batch: number };
  readonly prefetch: number;
  readonly minDemand: number;
  readonly drainTimeout: number;
  readonly flushers: readonly ResolvedFlusher[];
  readonly insertBatcher:
    | false
    | {
        readonly maxBatch: number;
        readonly maxDelayMs: number;
        readonly maxBuffer: number;
        readonly durable: boolean;
      };
  readonly nodeId: string;
  readonly preparedStatements: boolean;
  readonly statementTimeout: number;
  readonly maxStateBytes: number;
}
