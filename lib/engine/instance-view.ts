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
  readonly insertedAt: Date;
  readonly updatedAt: Date;
}

/** What `EngineService.await` answers (docs/design.md §9). */
export type AwaitResult =
  | { readonly kind: 'done'; readonly result: Record<string, unknown> }
  | { readonly kind: 'failed'; readonly error: string }
  | {
      readonly kind: 'awaiting' | 'busy';
      readonly snapshot: {
        readonly status: DurableStatus;
        readonly step: string;
        readonly attempt: number;
      };
    }
  | { readonly kind: 'not_found' };

export interface InstanceRecord {
  id: string;
  fsm: string;
  fsm_version: number;
  step: string;
  status: DurableStatus;
  state: Record<string, unknown>;
  result: Record<string, unknown> | null;
  last_error: string | null;
  attempt: number;
  awaits: string[] | null;
  await_deadline: Date | null;
  queue: string;
  priority: number;
  eligible_at: Date;
  concurrency_key: string | null;
  concurrency_shard: number | null;
  rate_limit: string | null;
  weight: number;
  locked_by: string | null;
  lease_expires_at: Date | null;
  parent_id: string | null;
  children_pending: number;
  correlation_key: string | null;
  correlation_scope: DurableStatus[];
  claim_seq: string;
  reaps: number;
  inserted_at: Date;
  updated_at: Date;
}

export function toInstanceView(r: InstanceRecord): InstanceView {
  return Object.freeze({
    id: r.id,
    fsm: r.fsm,
    fsmVersion: r.fsm_version,
    step: r.step,
    status: r.status,
    state: r.state,
    result: r.result,
    lastError: r.last_error,
    attempt: r.attempt,
    awaits: r.awaits,
    awaitDeadline: r.await_deadline,
    queue: r.queue,
    priority: r.priority,
    eligibleAt: r.eligible_at,
    concurrencyKey: r.concurrency_key,
    concurrencyShard: r.concurrency_shard,
    rateLimit: r.rate_limit,
    weight: r.weight,
    lockedBy: r.locked_by,
    leaseExpiresAt: r.lease_expires_at,
    parentId: r.parent_id,
    childrenPending: r.children_pending,
    correlationKey: r.correlation_key,
    correlationScope: r.correlation_scope,
    claimSeq: r.claim_seq,
    reaps: r.reaps,
    insertedAt: r.inserted_at,
    updatedAt: r.updated_at,
  });
}
