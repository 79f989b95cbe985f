import type { DurableStatus } from '../gen-durable.constants';

/** An instance row in camelCase (docs/design.md §2.5, §3.2). Ids are decimal strings. */
export interface InstanceView {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly status: DurableStatus;
  readonly state: Record<string, unknown>;
  readonly result: Record<string, unknown> | null;
  readonly lastError: string | null;
  readonly attempt: number;
  readonly awaits: readonly string[] | null;
  readonly awaitDeadline: Date | null;
  readonly queue: string;
  readonly priority: number;
  readonly eligibleAt: Date;
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  readonly lockedBy: string | null;
  readonly leaseExpiresAt: Date | null;
  readonly parentId: string | null;
  readonly childrenPending: number;
  readonly correlationKey: string | null;
  readonly correlationScope: readonly DurableStatus[];
  readonly claimSeq: string;
  readonly reaps: number;
  /** When a cancel was requested (docs/design.md §27.2); kept once the row is cancelled. */
  readonly cancelRequestedAt: Date | null;
  /** The reason given to `cancel`, or null. */
  readonly cancelReason: string | null;
  readonly insertedAt: Date;
  readonly updatedAt: Date;
  /**
   * The latest value the running (or last) step reported with `ctx.progress` (docs/design.md
   * §28.2), stored by the heartbeat after it; null when none was.
   */
  readonly progress: unknown;
  /** When `progress` was stored (database clock), or null. */
  readonly progressAt: Date | null;
  /** The instance this one was forked from (docs/design.md §28.3), or null. */
  readonly forkedFrom: string | null;
  /**
   * When the instance was held (`hold`, `insert({ held: true })`; docs/operations-control.md
   * "Hold and release"): a held instance is never claimed. Null when not held.
   */
  readonly heldAt: Date | null;
  /** The reason given to `hold`, or null. */
  readonly heldReason: string | null;
  /** The end of its key's dedup window (`insert({ dedupWindowMs })`, docs/identity.md), or null. */
  readonly dedupUntil: Date | null;
  /**
   * The instance deadline (docs/operations-control.md "Instance deadlines"): past it, a live
   * instance is cancelled or moved to its FSM's `onDeadline` step; null = none (or moved there).
   */
  readonly deadline: Date | null;
}

/** What `EngineService.await` answers (docs/design.md §9). */
export type AwaitResult =
  | { readonly kind: 'done'; readonly result: Record<string, unknown> }
  | { readonly kind: 'failed'; readonly error: string }
  | { readonly kind: 'cancelled'; readonly reason: string | null }
  | {
      readonly kind: 'awaiting' | 'busy';
      readonly snapshot: {
        readonly status: DurableStatus;
        readonly step: string;
        readonly attempt: number;
      };
    }
  | { readonly kind: 'not_found' };
