import { sql } from './statement';

/**
 * The claim (SPEC §5.3), one statement. `$1` queue, `$2` batch, `$3` worker id, `$4` lease
 * ms, `$5` this node's gate names.
 * - cand: the pick index gen_durable_pick scanned by queue equality in (priority, eligible_at)
 *   order, locked in-scan FOR NO KEY UPDATE SKIP LOCKED (skip-locked never waits). The K = 1
 *   guard drops a keyed, non-gated candidate whose key already executes, by a LATERAL LIMIT 1
 *   probe of gen_durable_concurrency_active (it repeats the arbiter's predicate, so the probe
 *   is index-only).
 * - kept: one row per raw key (NULL keys and gated rows all kept); losers stay runnable.
 * - The update goes by ctid (the rows this statement located and locked), stamps the lease
 *   and bumps claim_seq, the fencing token of SPEC §26.1. A cross-node race on one K = 1 key
 *   trips the arbiter index and aborts the statement; the scheduler retries.
 */
export const CLAIM_RUNNABLE = sql(
  'claim_runnable',
  `WITH cand AS (
     SELECT g.ctid AS tid, g.id, g.concurrency_key, g.priority, g.eligible_at,
            COALESCE(g.concurrency_name = ANY ($5::text[]), false) AS gated
       FROM {schema}.gen_durable g
       LEFT JOIN LATERAL (
         SELECT 1 AS busy
           FROM {schema}.gen_durable h
          WHERE h.concurrency_key = g.concurrency_key
            AND h.status = 'executing' AND h.concurrency_key IS NOT NULL AND h.concurrency_shard IS NULL
          LIMIT 1
       ) k ON g.concurrency_key IS NOT NULL AND NOT COALESCE(g.concurrency_name = ANY ($5::text[]), false)
      WHERE g.queue = $1 AND g.status = 'runnable' AND g.eligible_at <= now() AND k.busy IS NULL
      ORDER BY g.priority, g.eligible_at
      LIMIT $2
      FOR NO KEY UPDATE OF g SKIP LOCKED
   ), kept AS (
     SELECT c.tid, c.gated
       FROM (SELECT c.*, row_number() OVER (PARTITION BY c.concurrency_key
                                            ORDER BY c.priority, c.eligible_at, c.id) AS rn
               FROM cand c) c
      WHERE c.concurrency_key IS NULL OR c.gated OR c.rn = 1
   ), claimed AS (
     UPDATE {schema}.gen_durable g
        SET status = 'executing', locked_by = $3,
            lease_expires_at = now() + make_interval(secs => $4::float8 / 1000),
            concurrency_shard = CASE WHEN kept.gated THEN 0 END,
            claim_seq = g.claim_seq + 1, updated_at = now()
       FROM kept
      WHERE g.ctid = kept.tid
      RETURNING g.id, g.fsm, g.fsm_version, g.step, g.state, g.attempt, g.awaits, g.queue,
                g.priority, g.eligible_at, g.concurrency_key, g.concurrency_shard, g.rate_limit,
                g.weight, g.claim_seq, g.parent_id, kept.gated
   )
   SELECT * FROM claimed ORDER BY priority, eligible_at, id`,
);

/**
 * Enrichment 1 (SPEC §5.4): the unconsumed inboxes of a claimed batch, by id. Served by the
 * partial index signals_inbox (target_id, id) WHERE consumed_at IS NULL.
 */
export const LOAD_INBOXES = sql(
  'load_inboxes',
  `SELECT id, target_id, name, payload
     FROM {schema}.signals
    WHERE target_id = ANY ($1::bigint[]) AND consumed_at IS NULL
    ORDER BY target_id, id`,
);

/** Enrichment 2 (SPEC §5.4): every stored child of a claimed batch. Index gen_durable_parent. */
export const LOAD_CHILDREN = sql(
  'load_children',
  `SELECT id, parent_id, fsm, status, state, result, last_error
     FROM {schema}.gen_durable
    WHERE parent_id = ANY ($1::bigint[])
    ORDER BY parent_id, id`,
);
