import type { DurableStatus } from '../gen-durable.constants';
import type { ChildView, Signal } from '../fsm/step-context';
import type { LimiterSlot } from '../limiter/limiter.interface';

/** A row this node holds under a claim, with its enrichment snapshot. */
export interface ClaimedRow {
  readonly id: string;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly state: Record<string, unknown>;
  readonly attempt: number;
  readonly awaits: readonly string[] | null;
  readonly queue: string;
  readonly priority: number;
  readonly concurrencyKey: string | null;
  readonly concurrencyShard: number | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  /** The fencing token of this claim (docs/design.md §26.1). */
  readonly claimSeq: string;
  readonly parentId: string | null;
  readonly gated: boolean;
  /** The worker id that holds the claim. */
  readonly worker: string;
  /**
   * The gate slot admission drew for this row (docs/design.md §16), credited after its outcome commits
   * or when the claim is released; absent or null for rows that hold none.
   */
  slot?: LimiterSlot | null;
  inbox: readonly Signal[];
  children: readonly ChildView[];
}

/** A raw row of CLAIM_RUNNABLE. */
export interface ClaimRecord {
  id: string;
  fsm: string;
  fsm_version: number;
  step: string;
  state: Record<string, unknown>;
  attempt: number;
  awaits: string[] | null;
  queue: string;
  priority: number;
  concurrency_key: string | null;
  concurrency_shard: number | null;
  rate_limit: string | null;
  weight: number;
  claim_seq: string;
  parent_id: string | null;
  gated: boolean;
  /** The unconsumed inbox in id order (JSON), NULL when empty. */
  inbox: InboxRecord[] | null;
  /** Every stored child in id order (JSON), NULL when none. */
  children: ChildRecord[] | null;
}

/** A raw row of LOAD_ENRICHMENT. */
export interface EnrichmentRecord {
  id: string;
  inbox: InboxRecord[] | null;
  children: ChildRecord[] | null;
}

export interface InboxRecord {
  id: string;
  name: string;
  payload: unknown;
}

export interface ChildRecord {
  id: string;
  fsm: string;
  status: DurableStatus;
  state: unknown;
  result: unknown;
  last_error: string | null;
}
