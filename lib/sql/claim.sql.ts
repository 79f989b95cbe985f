import type { DurableStatus } from '../gen-durable.constants';
import type { ChildView, Signal } from '../fsm/step-context';
import { sql } from './statement';

/** What one claim asks for: `limit` due rows of `queue` for `worker`, leased `leaseMs`. */
export interface ClaimInput {
  readonly queue: string;
  readonly limit: number;
  readonly worker: string;
  readonly leaseMs: number;
  /** This node's gate names: a keyed row under one is admitted by the limiter, not the arbiter. */
  readonly gates: readonly string[];
}

/** A row claimed by CLAIM_RUNNABLE, with its enrichment snapshot. */
export interface ClaimRow {
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
  /**
   * Workers this row has lost on its current step (`gen_durable.reaps`). Above 0, the
   * scheduler records the start of its step (MARK_STEP_STARTED) before running it, so a later
   * loss is known to have happened while the step ran (docs/reliability.md, finding F-R11).
   */
  readonly reaps: number;
  /**
   * The row reached the poison-pill cap (`gen_durable.suspect`): the node runs it alone before
   * any verdict (docs/design.md §26.5, lib/runtime/solo-run.ts).
   */
  readonly suspect: boolean;
  readonly parentId: string | null;
  readonly gated: boolean;
  /** The worker id that holds the claim. */
  readonly worker: string;
  inbox: readonly Signal[];
  children: readonly ChildView[];
  /**
   * The W3C trace context stored with the row at insert (docs/design.md §31), or null; absent
   * on rows not read by a claim.
   */
  readonly traceContext?: string | null;
  /** The trace contexts of the unconsumed inbox's signals that carry one, in id order. */
  inboxTraceContexts?: readonly string[];
  /**
   * The value the row's current step reported with `ctx.progress` in an earlier run (stored
   * `progress` whose `step` is the row's step; docs/design.md §28.2), or undefined.
   */
  readonly lastProgress?: unknown;
}

/** What one claim answers: the rows it claimed, and whether its queue is paused (then none). */
export interface ClaimBatch {
  readonly rows: ClaimRow[];
  readonly paused: boolean;
}

/** A held row's enrichment as LOAD_ENRICHMENT re-reads it. */
export interface Enrichment {
  readonly id: string;
  readonly inbox: readonly Signal[];
  readonly children: readonly ChildView[];
  /** The trace contexts of the inbox's signals that carry one (docs/design.md §31). */
  readonly inboxTraceContexts: readonly string[];
}

interface ClaimRecord {
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
  reaps: number;
  suspect: boolean;
  /** The unconsumed inbox in id order (JSON), NULL when empty. */
  inbox: InboxRecord[] | null;
  /** Every stored child in id order (JSON), NULL when none. */
  children: ChildRecord[] | null;
  /** The queue's pause, on every row (docs/design.md §27.6). */
  paused: boolean;
  trace_context?: string | null;
  /** The progress this step reported in an earlier run (docs/design.md §28.2), or NULL. */
  last_progress?: unknown;
}

/** The one row of a claim that took nothing: no id, only the pause flag. */
interface EmptyClaimRecord {
  id: null;
  paused: boolean;
}

interface EnrichmentRecord {
  id: string;
  inbox: InboxRecord[] | null;
  children: ChildRecord[] | null;
}

interface InboxRecord {
  id: string;
  name: string;
  payload: unknown;
  /** The signal's stored trace context, or null. */
  tc?: string | null;
}

interface ChildRecord {
  id: string;
  fsm: string;
  status: DurableStatus;
  state: unknown;
  result: unknown;
  last_error: string | null;
}

/**
 * The claim (docs/design.md §5.3), one statement. `$1` queue, `$2` batch, `$3` worker id, `$4` lease
 * ms, `$5` this node's gate names.
 * - cand: the pick index gen_durable_pick scanned by queue equality in (priority, eligible_at)
 *   order, locked in-scan FOR NO KEY UPDATE SKIP LOCKED (skip-locked never waits). The K = 1
 *   guard drops a keyed, non-gated candidate whose key already executes, by a LATERAL LIMIT 1
 *   probe of gen_durable_concurrency_active (it repeats the arbiter's predicate, so the probe
 *   is index-only).
 * - A held row (`held_at`, docs/operations-control.md "Hold and release") is filtered out of
 *   the same scan (a heap filter, so the pick index still serves it): it stays runnable and
 *   is skipped by every claim until released; held rows rarely pile up, and each one due
 *   costs a scanned tuple per claim of its queue.
 * - The sequence guard (docs/sequences.md) drops a candidate with a `sequence_key` while an
 *   older row of its key (smaller id) holds the key: live, or failed under `'block'`. A
 *   LATERAL LIMIT 1 probe of gen_durable_sequence (it repeats the index's predicate, so the
 *   probe is index-only), run only for a candidate with a key: a row without one joins no
 *   probe. A retried head waiting on its backoff, a held head and a reaped head are runnable,
 *   so live: they keep their key. The guard reads the statement's snapshot, where an older
 *   row once visible never looks ended before it is (two claims cannot both pass a key's
 *   second row while its head is live).
 * - kept: one row per raw key (NULL keys and gated rows all kept); losers stay runnable.
 * - The update goes by ctid (the rows this statement located and locked), stamps the lease
 *   and bumps claim_seq, the fencing token of docs/design.md §26.1. A cross-node race on one K = 1 key
 *   trips the arbiter index and aborts the statement; the scheduler retries.
 * - pause: the queue's pause (docs/design.md §27.6), one primary-key probe of
 *   gen_durable_paused_queues (a miss for an unpaused queue). A paused queue's cand is empty
 *   (a one-time filter: the pick index is not scanned) and the statement answers one row
 *   without an id that carries `paused`, so the scheduler learns the pause from its claim and
 *   an unpaused queue's pick pays no extra statement. The probe reads the statement's
 *   snapshot: a pause that commits while a claim runs does not stop that claim.
 * - The enrichment (docs/design.md §5.4) rides in the same statement: per claimed row, its unconsumed
 *   inbox (index gen_durable_signals_inbox, probed only when the row was ever `signaled`) and every stored
 *   child (index gen_durable_parent), each as a JSON array or NULL. They read the statement's
 *   snapshot: a signal committed after it is not presented to this step, exactly as one
 *   delivered during the step; it stays unconsumed for the next step, the park recheck or the
 *   terminal sweep. Children of a runnable parent are terminal, so the snapshot is exact.
 * - `suspect` rides along too: a row at the poison-pill cap is found by the claim that takes
 *   it, with no statement of its own (docs/design.md §26.5); so do the row's `trace_context`
 *   and each inbox signal's (`tc`), for the step span's parent and links (docs/design.md §31);
 *   and the stored progress's value when it was reported by the row's current step (the
 *   `lastProgress` of a retried step, docs/design.md §28.2: NULL, so nearly free, for a row
 *   without progress).
 */
export const CLAIM_RUNNABLE = sql(
  'claim_runnable',
  `WITH pause AS (
     SELECT EXISTS (SELECT 1 FROM {schema}.gen_durable_paused_queues p WHERE p.queue = $1) AS paused
   ), cand AS (
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
       LEFT JOIN LATERAL (
         SELECT 1 AS ahead
           FROM {schema}.gen_durable a
          WHERE a.sequence_key = g.sequence_key AND a.id < g.id
            AND (a.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
                 OR (a.status = 'failed' AND a.on_head_failure = 'block'))
          LIMIT 1
       ) s ON g.sequence_key IS NOT NULL
      WHERE g.queue = $1 AND g.status = 'runnable' AND g.eligible_at <= now() AND k.busy IS NULL
        AND s.ahead IS NULL
        AND g.held_at IS NULL AND NOT (SELECT pause.paused FROM pause)
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
                g.weight, g.claim_seq, g.parent_id, g.signaled, g.reaps, g.suspect, g.trace_context,
                CASE WHEN g.progress->>'step' = g.step THEN g.progress->'value' END AS last_progress,
                kept.gated
   )
   SELECT c.id, c.fsm, c.fsm_version, c.step, c.state, c.attempt, c.awaits, c.queue, c.priority,
          c.concurrency_key, c.concurrency_shard, c.rate_limit, c.weight, c.claim_seq, c.parent_id,
          c.gated, c.reaps, c.suspect, ${inboxOf('c')} AS inbox, ${childrenOf('c')} AS children,
          pause.paused, c.trace_context, c.last_progress
     FROM pause LEFT JOIN claimed c ON true
    ORDER BY c.priority, c.eligible_at, c.id`,
  {
    params: (i: ClaimInput) => [i.queue, i.limit, i.worker, i.leaseMs, i.gates],
    decode: (rows: readonly (ClaimRecord | EmptyClaimRecord)[], i: ClaimInput): ClaimBatch => {
      const out: ClaimRow[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        // The row of an empty claim: no id, only the pause flag.
        if (r.id !== null) out.push(claimRow(r, i.worker));
      }
      return { rows: out, paused: rows[0]?.paused === true };
    },
  },
);

/**
 * The enrichment alone, one statement for any number of held rows (`$1` ids): what the claim
 * returns as `inbox` and `children`. Used by an inline chain before each next step (docs/design.md §7),
 * which runs on a held claim and so never passes through the claim. Same indexes.
 */
export const LOAD_ENRICHMENT = sql(
  'load_enrichment',
  `SELECT r.id::text AS id, ${inboxOf('r')} AS inbox, ${childrenOf('r')} AS children
     FROM {schema}.gen_durable r
    WHERE r.id = ANY ($1::bigint[])`,
  {
    params: (i: { readonly ids: readonly string[] }) => [i.ids],
    decode: (rows: readonly EnrichmentRecord[]): Enrichment[] => {
      const out: Enrichment[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        out[k] = {
          id: r.id,
          inbox: inboxView(r.inbox),
          children: childrenView(r.children),
          inboxTraceContexts: inboxTraces(r.inbox),
        };
      }
      return out;
    },
  },
);

/** The unconsumed inbox of row alias `r`, in id order, or NULL (gen_durable_signals_inbox). */
function inboxOf(r: string): string {
  return `CASE WHEN ${r}.signaled THEN (
            SELECT json_agg(json_build_object('id', s.id::text, 'name', s.name, 'payload', s.payload,
                                             'tc', s.trace_context) ORDER BY s.id)
              FROM {schema}.gen_durable_signals s
             WHERE s.target_id = ${r}.id AND s.consumed_at IS NULL) END`;
}

/** Every stored child of row alias `r`, in id order, or NULL (gen_durable_parent). */
function childrenOf(r: string): string {
  return `(SELECT json_agg(json_build_object('id', k.id::text, 'fsm', k.fsm, 'status', k.status, 'state', k.state,
                                             'result', k.result, 'last_error', k.last_error) ORDER BY k.id)
             FROM {schema}.gen_durable k
            WHERE k.parent_id = ${r}.id)`;
}

const NONE: readonly never[] = Object.freeze([]);

function inboxView(records: readonly InboxRecord[] | null): readonly Signal[] {
  if (records === null) return NONE;
  const out: Signal[] = [];
  for (let k = 0; k < records.length; k++) {
    const s = records[k]!;
    out[k] = Object.freeze({ id: s.id, name: s.name, payload: s.payload });
  }
  return Object.freeze(out);
}

/** The stored trace contexts of an inbox's signals, in id order (docs/design.md §31). */
function inboxTraces(records: readonly InboxRecord[] | null): readonly string[] {
  if (records === null) return NONE;
  let out: string[] | undefined;
  for (let k = 0; k < records.length; k++) {
    const tc = records[k]!.tc;
    if (tc !== null && tc !== undefined) (out ??= []).push(tc);
  }
  return out ?? NONE;
}

function childrenView(records: readonly ChildRecord[] | null): readonly ChildView[] {
  if (records === null) return NONE;
  const out: ChildView[] = [];
  for (let k = 0; k < records.length; k++) {
    const c = records[k]!;
    out[k] = Object.freeze({
      id: c.id,
      fsm: c.fsm,
      status: c.status,
      state: c.state,
      result: c.result,
      lastError: c.last_error,
    });
  }
  return Object.freeze(out);
}

function claimRow(r: ClaimRecord, worker: string): ClaimRow {
  return {
    id: r.id,
    fsm: r.fsm,
    fsmVersion: r.fsm_version,
    step: r.step,
    state: r.state,
    attempt: r.attempt,
    awaits: r.awaits,
    queue: r.queue,
    priority: r.priority,
    concurrencyKey: r.concurrency_key,
    concurrencyShard: r.concurrency_shard,
    rateLimit: r.rate_limit,
    weight: r.weight,
    claimSeq: r.claim_seq,
    reaps: r.reaps,
    suspect: r.suspect,
    parentId: r.parent_id,
    gated: r.gated,
    worker,
    inbox: inboxView(r.inbox),
    children: childrenView(r.children),
    traceContext: r.trace_context ?? null,
    lastProgress: r.last_progress ?? undefined,
    inboxTraceContexts: inboxTraces(r.inbox),
  };
}
