import { keyTargetId } from './instance.sql';
import { sql } from './statement';

/**
 * "Why isn't it running?" (docs/design.md §30; docs/dashboard-data.md): everything one
 * statement can read about an instance's wait, for lib/control/instance-explain.ts to turn into
 * reasons. Each part is a primary-key or index probe of the one row's values.
 */

/** What EXPLAIN_INSTANCE reads about one instance. */
export interface ExplainRecord {
  readonly id: string;
  readonly fsm: string;
  readonly version: number;
  readonly step: string;
  readonly status: string;
  readonly queue: string;
  readonly priority: number;
  readonly eligibleAt: Date;
  readonly now: Date;
  readonly attempt: number;
  readonly awaits: readonly string[] | null;
  readonly awaitDeadline: Date | null;
  readonly childrenPending: number;
  readonly concurrencyKey: string | null;
  readonly rateKey: string | null;
  readonly weight: number;
  readonly lockedBy: string | null;
  readonly leaseExpiresAt: Date | null;
  readonly lastError: string | null;
  readonly cancelRequestedAt: Date | null;
  readonly cancelReason: string | null;
  /** When it was held (docs/operations-control.md "Hold and release"), or null. */
  readonly heldAt: Date | null;
  readonly heldReason: string | null;
  /** Its instance deadline (docs/operations-control.md "Instance deadlines"), or null. */
  readonly deadlineAt: Date | null;
  readonly updatedAt: Date;
  /** Names of the inbox's unconsumed signals (distinct, at most 100). */
  readonly inbox: readonly string[];
  /** Another executing row holding its K = 1 concurrency key (not a configured gate). */
  readonly keyHolder: string | null;
  /** Its concurrency key names a configured gate. */
  readonly gated: boolean;
  readonly gateLimit: number | null;
  /** Free slots by the gate's counters (the limit when no counter row exists yet). */
  readonly gateFree: number | null;
  /** Executing rows holding the gate key (at most 1 000) and up to 10 of their ids. */
  readonly gateHolders: number;
  readonly gateHolderIds: readonly string[];
  /** Its rate key names a configured rate limit. */
  readonly rated: boolean;
  readonly rateCapacity: number | null;
  readonly ratePerSecond: number | null;
  /** Tokens in the bucket now (refilled to now; full when no counter row exists yet). */
  readonly rateAvailable: number | null;
  readonly paused: boolean;
  readonly pauseReason: string | null;
  readonly pausedAt: Date | null;
  /** Due runnable rows of its queue ahead of it in pick order (at most 1 000). */
  readonly ahead: number;
}

interface RawExplain {
  id: string;
  fsm: string;
  fsm_version: number;
  step: string;
  status: string;
  queue: string;
  priority: number;
  eligible_at: Date;
  now: Date;
  attempt: number;
  awaits: string[] | null;
  await_deadline: Date | null;
  children_pending: number;
  concurrency_key: string | null;
  rate_limit: string | null;
  weight: number;
  locked_by: string | null;
  lease_expires_at: Date | null;
  last_error: string | null;
  cancel_requested_at: Date | null;
  cancel_reason: string | null;
  held_at: Date | null;
  held_reason: string | null;
  deadline_at: Date | null;
  updated_at: Date;
  inbox: string[] | null;
  key_holder: string | null;
  gated: boolean;
  gate_limit: number | null;
  gate_free: number | null;
  gate_holders: number;
  gate_holder_ids: string[] | null;
  rated: boolean;
  rate_capacity: number | null;
  rate_per_second: number | null;
  rate_available: number | null;
  paused: boolean;
  pause_reason: string | null;
  paused_at: Date | null;
  ahead: number;
}

function explainOf(r: RawExplain): ExplainRecord {
  return {
    id: r.id,
    fsm: r.fsm,
    version: r.fsm_version,
    step: r.step,
    status: r.status,
    queue: r.queue,
    priority: r.priority,
    eligibleAt: r.eligible_at,
    now: r.now,
    attempt: r.attempt,
    awaits: r.awaits,
    awaitDeadline: r.await_deadline,
    childrenPending: r.children_pending,
    concurrencyKey: r.concurrency_key,
    rateKey: r.rate_limit,
    weight: r.weight,
    lockedBy: r.locked_by,
    leaseExpiresAt: r.lease_expires_at,
    lastError: r.last_error,
    cancelRequestedAt: r.cancel_requested_at,
    cancelReason: r.cancel_reason,
    heldAt: r.held_at,
    heldReason: r.held_reason,
    deadlineAt: r.deadline_at,
    updatedAt: r.updated_at,
    inbox: r.inbox ?? [],
    keyHolder: r.key_holder,
    gated: r.gated,
    gateLimit: r.gate_limit,
    gateFree: r.gate_free,
    gateHolders: r.gate_holders,
    gateHolderIds: r.gate_holder_ids ?? [],
    rated: r.rated,
    rateCapacity: r.rate_capacity,
    ratePerSecond: r.rate_per_second,
    rateAvailable: r.rate_available,
    paused: r.paused,
    pauseReason: r.pause_reason,
    pausedAt: r.paused_at,
    ahead: r.ahead,
  };
}

/**
 * One instance (`$1` id, else the instance correlation key `$2` addresses: its live occupant,
 * else the most recent ended one, {@link keyTargetId}; primary key, or gen_durable_correlation
 * then gen_durable_ended_key; hot or archived, view gen_durable_all, docs/archive.md) and what
 * it waits on:
 * - inbox: distinct unconsumed names (gen_durable_signals_inbox, `target_id` equality, ≤ 100 rows);
 * - K = 1 holder: gen_durable_concurrency_active (unique on the executing key without shard);
 * - gate: its config (gen_durable_bucket_configs_pkey), counters (gen_durable_buckets_pkey,
 *   `(kind, key)` prefix), executing holders of the key (gen_durable_lease: executing rows
 *   only, ≤ 1 000 examined);
 * - rate bucket: config and counters by primary key, tokens refilled to now() as ADMIT does;
 * - pause: gen_durable_paused_queues_pkey;
 * - due rows ahead in pick order: gen_durable_pick, a range before its (priority,
 *   eligible_at), ≤ 1 000.
 */
export const EXPLAIN_INSTANCE = sql(
  'explain_instance',
  `WITH r AS (
     (SELECT g.* FROM {schema}.gen_durable_all g WHERE $1::bigint IS NOT NULL AND g.id = $1 LIMIT 1)
     UNION ALL
     (SELECT g.* FROM {schema}.gen_durable_all g
       WHERE $1::bigint IS NULL AND g.id = ${keyTargetId('$2')} LIMIT 1)
   ), gcfg AS (
     SELECT c.capacity::int AS lim
       FROM r JOIN {schema}.gen_durable_bucket_configs c
         ON c.kind = 'conc' AND c.name = split_part(r.concurrency_key, ':', 1) AND c.capacity >= 1
   ), rcfg AS (
     SELECT c.capacity, COALESCE(c.rate, 0) AS rate, GREATEST(c.shards, 1) AS shards
       FROM r JOIN {schema}.gen_durable_bucket_configs c
         ON c.kind = 'rate' AND c.name = split_part(r.rate_limit, ':', 1)
   ), holders AS (
     SELECT h.id FROM (
       SELECT x.id, x.concurrency_key, x.concurrency_shard FROM {schema}.gen_durable x
        WHERE x.status = 'executing' ORDER BY x.lease_expires_at LIMIT 1000) h, r
      WHERE h.concurrency_key = r.concurrency_key AND h.concurrency_shard IS NOT NULL AND h.id <> r.id
   )
   SELECT r.id::text, r.fsm, r.fsm_version, r.step, r.status::text, r.queue, r.priority, r.eligible_at,
          now() AS now, r.attempt, r.awaits, r.await_deadline, r.children_pending,
          r.concurrency_key, r.rate_limit, r.weight, r.locked_by, r.lease_expires_at, r.last_error,
          r.cancel_requested_at, r.cancel_reason, r.held_at, r.held_reason, r.deadline_at, r.updated_at,
          ARRAY(SELECT DISTINCT s.name FROM (
                  SELECT s.name FROM {schema}.gen_durable_signals s
                   WHERE s.target_id = r.id AND s.consumed_at IS NULL ORDER BY s.id LIMIT 100) s
                 ORDER BY s.name) AS inbox,
          (SELECT k.id::text FROM {schema}.gen_durable k
            WHERE k.status = 'executing' AND k.concurrency_key = r.concurrency_key
              AND k.concurrency_shard IS NULL AND k.id <> r.id
              AND NOT EXISTS (SELECT 1 FROM gcfg)) AS key_holder,
          EXISTS (SELECT 1 FROM gcfg) AS gated,
          (SELECT lim FROM gcfg) AS gate_limit,
          (SELECT CASE WHEN count(b.*) = 0 THEN (SELECT lim FROM gcfg)
                       ELSE sum(GREATEST(floor(b.available), 0))::int END
             FROM {schema}.gen_durable_buckets b
            WHERE b.kind = 'conc' AND b.key = r.concurrency_key AND EXISTS (SELECT 1 FROM gcfg)) AS gate_free,
          (SELECT count(*)::int FROM holders) AS gate_holders,
          ARRAY(SELECT h.id::text FROM holders h ORDER BY h.id LIMIT 10) AS gate_holder_ids,
          EXISTS (SELECT 1 FROM rcfg) AS rated,
          (SELECT capacity FROM rcfg) AS rate_capacity,
          (SELECT rate FROM rcfg) AS rate_per_second,
          (SELECT CASE WHEN count(b.*) = 0 THEN c.capacity
                       ELSE sum(LEAST(c.capacity / c.shards, b.available
                              + GREATEST(0, extract(epoch FROM now() - COALESCE(b.last_refill, now())))
                                * c.rate / c.shards)) END
             FROM rcfg c LEFT JOIN {schema}.gen_durable_buckets b
               ON b.kind = 'rate' AND b.key = r.rate_limit
            GROUP BY c.capacity) AS rate_available,
          p.queue IS NOT NULL AS paused, p.reason AS pause_reason, p.paused_at,
          (SELECT count(*)::int FROM (SELECT 1 FROM {schema}.gen_durable a
             WHERE a.queue = r.queue AND a.status = 'runnable'
               AND (a.priority, a.eligible_at) < (r.priority, r.eligible_at) AND a.eligible_at <= now()
             ORDER BY a.priority, a.eligible_at LIMIT 1000) x) AS ahead
     FROM r LEFT JOIN {schema}.gen_durable_paused_queues p ON p.queue = r.queue`,
  {
    params: (i: { readonly id: string | null; readonly correlationKey: string | null }) => [
      i.id,
      i.correlationKey,
    ],
    decode: (rows: readonly RawExplain[]): ExplainRecord | null =>
      rows[0] ? explainOf(rows[0]) : null,
  },
);
