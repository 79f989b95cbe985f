import type { EntityManager } from 'typeorm';

import type { DurableStatus } from '../gen-durable.constants';
import type { LimitKey } from './limit-key';
import type { OnHeadFailure } from './sequence-policy';

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
   * `insert` only: what an occupied correlation key answers (docs/identity.md "Conflict
   * modes"). `'error'` (default): `DuplicateError`. `'skip'` (alias `'return'`): the id of the
   * instance that holds the key, nothing stored, so retrying an insert whose acknowledgement
   * was lost is safe (the holder may be someone else's instance with the same key: keys are
   * identities). `'debounce'` (with `debounceMs`): a live occupant that is still runnable and
   * never started takes the new state and starts `debounceMs` from now (bounded by
   * `maxDelayMs` from its first insert); an occupant that started is answered, nothing stored.
   * `'replace'`: the live occupant is cancelled (cooperatively, as `cancel` would) and frees
   * the key; the new instance is inserted. Anything but `'error'` bypasses the durable insert
   * batcher.
   */
  onConflict?: 'error' | 'return' | 'skip' | 'debounce' | 'replace';
  /** With `onConflict: 'debounce'` (required there): the quiet time, ms, integer ≥ 1. */
  debounceMs?: number;
  /** With `onConflict: 'debounce'`: the latest start counted from the first insert, ms (≥ `debounceMs`). Default: unbounded. */
  maxDelayMs?: number;
  /**
   * The key stays taken for this long after the insert, ms, whatever the instance's status
   * (docs/identity.md "Dedup windows"), in addition to `correlationScope`. Needs
   * `correlationKey`. Every insert path takes it (`insert`, `insertAll` entries, `insertAsync`,
   * children, `GenDurableClient.insert`).
   */
  dedupWindowMs?: number;
  /**
   * The fairness key of the instance (docs/many-tenants.md "Fair claims by key"), e.g. its
   * tenant id: a non-empty string of at most 200 characters. Within one queue and priority the
   * claim serves keys in weighted round robin, and a lone busy key still gets the whole queue.
   * Wins over the FSM's `@DurableFsm({ fairnessKey })`. Every insert path takes it. Default:
   * none (the queue's plain order).
   */
  fairnessKey?: string;
  /**
   * The key's weight, integer 1 … 1000: a key whose rows weigh 2 is served twice as many rows
   * as a key whose rows weigh 1, while both have work. Needs a fairness key. Default `1`.
   */
  fairnessWeight?: number;
  /**
   * When the instance must have ended (docs/operations-control.md "Instance deadlines"): a
   * live instance past it is cancelled (an executing one cooperatively, then fenced after its
   * FSM's `deadlineGraceMs`), or routed to its FSM's `onDeadline` step. Wins over
   * `deadlineInMs` and the FSM's `deadlineMs`. Default: none.
   */
  deadline?: Date;
  /** The deadline as a delay from the insert, ms (database clock), integer ≥ 1. Wins over the FSM's `deadlineMs`. */
  deadlineInMs?: number;
  /**
   * Insert held: it is never claimed until `release` (docs/operations-control.md "Hold and
   * release"). Every insert path takes it (`insert`, `insertAll` entries, `insertAsync`,
   * children, `GenDurableClient.insert`).
   */
  held?: boolean;
  /**
   * Strict order per key (docs/sequences.md): the instance is claimed only once no older
   * instance of this key (smaller id) is live, or failed under `'block'`. Every insert path
   * takes it (`insert`, `insertAll` entries, `insertAsync`, children, `GenDurableClient.insert`).
   * Default: the FSM's `sequenceKey(state)`, else none.
   */
  sequenceKey?: string;
  /**
   * With a sequence key: what this instance does to its key once it has failed
   * (docs/sequences.md "When the head fails"): `'block'` holds the key until it is retried,
   * cancelled or purged; `'skip'` releases it. A head waiting on a retry backoff holds its key
   * under either. Default: the FSM's `onHeadFailure`, else `'block'`.
   */
  onHeadFailure?: OnHeadFailure;
  /** Join the caller's TypeORM transaction (insert/insertAll/signal only). */
  manager?: EntityManager;
}
