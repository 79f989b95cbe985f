import type { EntityManager } from 'typeorm';

import type { DurableStatus } from '../gen-durable.constants';
import type { LimitKey } from './limit-key';

/** Options of `insert` / `insertAll` entries (docs/design.md §2.5). */
export interface InsertOptions {
  /** Initial state (a JSON object). Default `{}`. */
  state?: Record<string, unknown>;
  /** Alias of `state` for jobs. */
  args?: Record<string, unknown>;
  /** First step. Default the FSM's `initial`. */
  step?: string;
  /** Queue. Default the FSM's queue. */
  queue?: string;
  /** Lower runs first; smallint. Default 0. */
  priority?: number;
  /** Absolute start time (wins over scheduleAt/scheduleIn). */
  eligibleAt?: Date;
  /** Absolute start time (wins over scheduleIn). */
  scheduleAt?: Date;
  /** Delay from now, ms (database clock), integer ≥ 0. */
  scheduleIn?: number;
  /** Identity: unique among occupants, and a signal address (docs/design.md §11). */
  correlationKey?: string;
  /** Statuses in which the key is occupied. Default the live statuses. */
  correlationScope?: readonly DurableStatus[];
  /** Concurrency key of the first step (docs/design.md §14). */
  concurrencyKey?: LimitKey;
  /** Rate limit of the first step (docs/design.md §15). */
  rateLimit?: LimitKey;
  /** Tokens the first step takes (> 0). Default 1. */
  weight?: number;
  /**
   * `insert` only: what an occupied correlation key answers. `'error'` (default):
   * `DuplicateError`. `'return'`: the id of the instance that holds the key, so retrying an
   * insert whose acknowledgement was lost is safe (the holder may be someone else's instance
   * with the same key: keys are identities). Bypasses the durable insert batcher.
   */
  onConflict?: 'error' | 'return';
  /** Join the caller's TypeORM transaction (insert/insertAll/signal only). */
  manager?: EntityManager;
}
