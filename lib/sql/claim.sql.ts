import type { DurableStatus } from '../gen-durable.constants';
import type { ChildView, Signal } from '../fsm/step-context';
import type { InsertRow } from '../instance/insert-row';
import { INSERT_ROW_COLUMNS, insertRowParams, insertRowSelect } from './insert.sql';
import { holdsKey } from './sequence.sql';
import { sql } from './statement';
import { internedName } from './row-decoders';

/** What one claim asks for: `limit` due rows of `queue` for `worker`, leased `leaseMs`. */
export interface ClaimInput {
  readonly queue: string;
  readonly limit: number;
  readonly worker: string;
  readonly leaseMs: number;
  /** This node's gate names: a keyed row under one is admitted by the limiter, not the arbiter. */
  readonly gates: readonly string[];
  /**
   * Where in the pick index's `(priority, eligible_at)` order to start (docs/design.md §5.3.1),
   * or undefined to scan from the head of the index (a full scan).
   */
  readonly from?: ClaimStart | undefined;
  /**
   * Look at the horizon's oldest holders (`horizon_xids`) when the claim has run at least this
   * many ms on the server; undefined never looks (docs/design.md §5.3.1).
   */
  readonly horizonCheckMs?: number | undefined;
}

/** A bounded claim's start: the queue's claim floor (lib/runtime/claim-floor.ts). */
export interface ClaimStart {
  readonly priority: number;
  /** The candidates' scan starts at `(priority, scanFrom)`: the floor less its slack. */
  readonly scanFrom: Date;
  /** The head probe starts at `(priority, headFrom)`: the floor itself. */
  readonly headFrom: Date;
}

/** The oldest runnable row a claim saw from its start (docs/design.md §5.3.1). */
export interface ClaimHead {
  readonly priority: number;
  /** Its `eligible_at`, or the statement's `now()` when that is later. */
  readonly at: Date;
}

/** `a` comes before `b` in the pick index's `(priority, eligible_at)` order. */
export function headBefore(a: ClaimHead, b: ClaimHead): boolean {
  return a.priority < b.priority || (a.priority === b.priority && a.at.getTime() < b.at.getTime());
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
  /** The row's fairness key (docs/many-tenants.md "Fair claims by key"), or null. */
  readonly fairnessKey?: string | null;
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
  /**
   * CLAIM_RUNNABLE only (docs/design.md §5.3.1): the oldest runnable, unheld row at or after
   * the claim's start, or undefined for none.
   */
  readonly head?: ClaimHead | undefined;
  /** CLAIM_RUNNABLE only: the statement's `now()`. */
  readonly dbNow?: Date;
  /**
   * CLAIM_RUNNABLE only: how long the statement ran on the server, in ms: from its start to
   * the projection of its last answer row (after the candidates' scan, the update and the
   * head probe).
   */
  readonly execMs?: number;
  /**
   * CLAIM_RUNNABLE only: how many transaction ids were assigned since the oldest transaction
   * still running began (the statement's snapshot, `xmax − xmin`): large while a transaction
   * that took an id stays open, which pins the xmin horizon (docs/design.md §5.3.1).
   */
  readonly pinXids?: number;
  /**
   * CLAIM_RUNNABLE only, when it looked ({@link ClaimInput.horizonCheckMs}): the age in ids of
   * the oldest snapshot a session of this database (or a standby's feedback, or a replication
   * slot) holds, which pins the horizon without an id of its own (a REPEATABLE READ reader,
   * `pg_dump`); undefined when it did not look.
   */
  readonly horizonXids?: number | undefined;
  /**
   * CLAIM_FAIR only: the queue still has fairness heads (gen_durable_fair_keys), so its next
   * claim should be fair too; absent from CLAIM_RUNNABLE.
   */
  readonly fair?: boolean;
}

/** A held row's enrichment as LOAD_ENRICHMENT re-reads it. */
export interface Enrichment {
  readonly id: string;
  readonly inbox: readonly Signal[];
  readonly children: readonly ChildView[];
  /** The trace contexts of the inbox's signals that carry one (docs/design.md §31). */
  readonly inboxTraceContexts: readonly string[];
}

/**
 * A claimed row as `pg` hands it over: the answer's columns are aliased to {@link ClaimRow}'s
 * names ({@link ANSWER_COLUMNS}), so the decoder completes this object in place (the worker,
 * the inbox and children views) instead of copying it into a second one per claimed row.
 */
interface ClaimRecord {
  id: string;
  fsm: string;
  fsmVersion: number;
  step: string;
  state: Record<string, unknown>;
  attempt: number;
  awaits: string[] | null;
  queue: string;
  priority: number;
  concurrencyKey: string | null;
  concurrencyShard: number | null;
  rateLimit: string | null;
  weight: number;
  fairnessKey: string | null;
  claimSeq: string;
  parentId: string | null;
  gated: boolean;
  reaps: number;
  suspect: boolean;
  /** The unconsumed inbox in id order (JSON), NULL when empty. */
  inbox: InboxRecord[] | null;
  /** Every stored child in id order (JSON), NULL when none. */
  children: ChildRecord[] | null;
  /** The queue's pause, on every row (docs/design.md §27.6). */
  paused: boolean;
  traceContext: string | null;
  /** The progress this step reported in an earlier run (docs/design.md §28.2), or NULL. */
  lastProgress: unknown;
  /** NULL placeholders (see {@link ANSWER_COLUMNS}). */
  worker: null;
  inboxTraceContexts: null;
  /** CLAIM_RUNNABLE only: NULL on a claimed row (the trailer carries them). */
  head_priority?: null;
  head_at?: null;
  db_now?: null;
  exec_ms?: null;
  pin_xids?: null;
  horizon_xids?: null;
}

/**
 * The claimed row's columns of both claims' answers, aliased to {@link ClaimRow}'s field
 * names, from the `claimed` CTE `c`, plus the queue's pause. `worker` and
 * `inboxTraceContexts` come as NULL placeholders the decoder fills: `pg` keeps most of a row's
 * fields in an out-of-object property array, and a property added after it is built copies
 * that whole array (~230 bytes a claimed row), where an assignment copies nothing.
 */
const ANSWER_COLUMNS = `c.id, c.fsm, c.fsm_version AS "fsmVersion", c.step, c.state, c.attempt, c.awaits,
          c.queue, c.priority, c.concurrency_key AS "concurrencyKey",
          c.concurrency_shard AS "concurrencyShard", c.rate_limit AS "rateLimit", c.weight,
          c.claim_seq AS "claimSeq", c.parent_id AS "parentId", c.gated, c.reaps, c.suspect,
          ${inboxOf('c')} AS inbox, ${childrenOf('c')} AS children, pause.paused,
          c.trace_context AS "traceContext", c.last_progress AS "lastProgress",
          c.fairness_key AS "fairnessKey", NULL::text AS worker, NULL::text AS "inboxTraceContexts"`;

/**
 * The row without an id: CLAIM_FAIR's one row of a claim that took nothing, and
 * CLAIM_RUNNABLE's trailer, its answer's last row whatever it claimed. It carries the pause
 * flag, and for CLAIM_RUNNABLE the head's place and `now()` as epoch ms (float8: numbers, not
 * timestamps `pg` would parse into Dates) and the statement's time so far (numeric, as text).
 */
interface EmptyClaimRecord {
  id: null;
  paused: boolean;
  head_priority?: number | null;
  head_at?: number | null;
  db_now?: number;
  exec_ms?: string;
  /** bigint, as text. */
  pin_xids?: string;
  /** int, NULL when the claim did not look. */
  horizon_xids?: number | null;
  fair?: boolean;
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
 * The age in ids of the oldest snapshot that pins this database's horizon without an id of its
 * own: the oldest `backend_xmin` among this database's sessions and the walsenders (a standby's
 * feedback), from pg_stat_get_activity (its `backend_xmin` is shown to any role), and the
 * replication slots' `xmin`; 0 when none. About 0.1 ms with a few dozen sessions.
 */
const HORIZON_AGE = `GREATEST(
            (SELECT max(age(a.backend_xmin)) FROM pg_stat_get_activity(NULL) a
              WHERE a.datid IS NULL
                 OR a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())),
            (SELECT max(age(r.xmin)) FROM pg_replication_slots r), 0)`;

/**
 * The claim (docs/design.md §5.3), one statement. `$1` queue, `$2` batch, `$3` worker id, `$4` lease
 * ms, `$5` this node's gate names, `$6`–`$8` the claim floor (docs/design.md §5.3.1): the
 * candidates' scan starts at `($6, $7)` and the head probe at `($6, $8)` in the pick index's
 * `(priority, eligible_at)` order; `(-32768, -infinity)` for both is a full scan from the head.
 * - head: the oldest runnable, unheld row at or after the floor, in the statement's snapshot,
 *   unlocked (a row another claim holds still counts): a LIMIT 1 scan of gen_durable_pick
 *   seeking to `(queue, $6, $8)` by the row comparison. It answers the next claim's floor, so
 *   a bounded claim never walks the index entries of rows that left `runnable` before its
 *   previous claim (under a pinned xmin horizon they cannot be pruned, and each costs a heap
 *   visit). Its `at` is capped at `now()`, so a future head never lifts the floor past rows
 *   that become due now.
 * - The answer: the claimed rows in pick order, then one trailer row without an id (`UNION
 *   ALL`; a paused queue's or an empty claim's only row). The trailer carries, once, the
 *   queue's pause, the head (`head_priority`, `head_at`), `db_now` (both as epoch ms), and
 *   `exec_ms` (CTE `written`), the time from the statement's start to the end of the claim's
 *   write: the claim's server-side cost, which engages the floor, and `pin_xids`, its snapshot's
 *   `xmax − xmin` (txid_current_snapshot(), read from memory, no table): the ids assigned since
 *   the oldest running transaction began, a horizon pinned by an open transaction that took an
 *   id. And, when the claim ran at least `$9` ms (the floor asks at most once a second), and
 *   only then, `horizon_xids`: the age of the oldest `backend_xmin` among this database's
 *   sessions and the walsenders (pg_stat_get_activity, readable by any role; a standby's
 *   feedback) and of the replication slots' `xmin`: the pins without an id of their own. About
 *   0.1 ms, which a claim that already took `$9` can afford and a cheap one should not pay.
 *   `written` is joined into the
 *   claimed rows' branch so it is read before their sort emits a row: taken at the trailer, the
 *   time would include sending the rows, which a slow client or link would inflate.
 *   On the claimed rows those six are NULL constants: computing, sending and parsing them per
 *   row cost about a tenth of a 740-row claim's round trip (docs/performance.md, "What a row's
 *   update costs").
 * - cand: the pick index gen_durable_pick scanned by queue equality from `($6, $7)` (a seek by
 *   the row comparison) in (priority, eligible_at) order, from the statement's own parameters:
 *   a bound taken from the head probe (an InitPlan) is not an index bound to the planner, and
 *   with a large backlog it sorted a sequential scan instead (test/engine/claim-floor.spec.ts),
 *   so under a pin a full scan walks the dead entries at the head twice (head probe, cand);
 *   locked in-scan FOR NO KEY UPDATE SKIP LOCKED (skip-locked never waits). The K = 1 guard
 *   drops a keyed, non-gated candidate whose key already executes, by a NOT EXISTS probe of
 *   gen_durable_concurrency_active (it repeats the arbiter's predicate, so the probe is
 *   index-only). Both guards (this and the sequence guard below) are written as
 *   `key IS NULL OR NOT EXISTS (…)`, not as LEFT JOIN LATERAL … IS NULL: the planner
 *   estimated the joins' IS NULL filters as keeping 1 row in 200, so with a large backlog it
 *   expected the index scan to read everything before `LIMIT` and chose a sorted sequential
 *   scan of the table; the OR keeps the estimate at the share of rows without a key (the
 *   probe runs only for a row with one). The K = 1 probe ends in `OFFSET 0`, so the planner
 *   keeps it a per-row probe by key instead of hashing every executing key once per claim (an
 *   EXISTS it can simplify becomes `NOT (key = ANY (hashed SubPlan))`). The two guards are the
 *   fragments `notBusy` and `noOlderHolder`, shared with CLAIM_FAIR, as are `kept` and the
 *   claim's write (`keptOnePerKey`, `claimKept`).
 * - A held row (`held_at`, docs/operations-control.md "Hold and release") is filtered out of
 *   the same scan (a heap filter, so the pick index still serves it): it stays runnable and
 *   is skipped by every claim until released; held rows rarely pile up, and each one due
 *   costs a scanned tuple per claim of its queue.
 * - The sequence guard (docs/sequences.md) drops a candidate with a `sequence_key` while an
 *   older row of its key (smaller id) holds the key: live, or failed under `'block'`. A
 *   NOT EXISTS probe of gen_durable_sequence (it repeats the index's predicate, so the probe
 *   is index-only), run only for a candidate with a key: a row without one runs no probe. A retried head waiting on its backoff, a held head and a reaped head are runnable,
 *   so live: they keep their key. The guard reads the statement's snapshot, where an older
 *   row once visible never looks ended before it is (two claims cannot both pass a key's
 *   second row while its head is live).
 * - kept: one row per raw key (NULL keys and gated rows all kept); losers stay runnable.
 * - The update goes by ctid (the rows this statement located and locked), pinned to a TID scan
 *   by `ctid = ANY (ARRAY(…))` (joined by ctid alone, a claim of ~700 rows hashed a sequential
 *   scan of the table: test/engine/claim-write-plan.spec.ts), stamps the lease
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
 *   child (index gen_durable_parent, probed only when the table holds a child at all: one
 *   backward scan of that index a statement), each as a JSON array or NULL. They read the statement's
 *   snapshot: a signal committed after it is not presented to this step, exactly as one
 *   delivered during the step; it stays unconsumed for the next step, the park recheck or the
 *   terminal sweep. Children of a runnable parent are terminal, so the snapshot is exact.
 * - `suspect` rides along too: a row at the poison-pill cap is found by the claim that takes
 *   it, with no statement of its own (docs/design.md §26.5); so do the row's `trace_context`
 *   and each inbox signal's (`tc`), for the step span's parent and links (docs/design.md §31);
 *   and the stored progress's value when it was reported by the row's current step (the
 *   `lastProgress` of a retried step, docs/design.md §28.2: NULL, so nearly free, for a row
 *   without progress).
 * - `fairness_key` rides along (no index involved): a keyed row tells the picker that its
 *   queue holds fairness keys, and its next claim is CLAIM_FAIR (docs/many-tenants.md).
 */
export const CLAIM_RUNNABLE = sql(
  'claim_runnable',
  `WITH pause AS (
     SELECT EXISTS (SELECT 1 FROM {schema}.gen_durable_paused_queues p WHERE p.queue = $1) AS paused
   ), head AS (
     SELECT h.priority, LEAST(h.eligible_at, now()) AS at
       FROM {schema}.gen_durable h
      WHERE h.queue = $1 AND h.status = 'runnable' AND h.held_at IS NULL
        AND (h.priority, h.eligible_at) >= ($6::smallint, $8::timestamptz)
      ORDER BY h.priority, h.eligible_at
      LIMIT 1
   ), cand AS (
     SELECT g.ctid AS tid, g.id, g.concurrency_key, g.priority, g.eligible_at,
            COALESCE(g.concurrency_name = ANY ($5::text[]), false) AS gated
       FROM {schema}.gen_durable g
      WHERE g.queue = $1 AND g.status = 'runnable' AND g.eligible_at <= now()
        AND (g.priority, g.eligible_at) >= ($6::smallint, $7::timestamptz)
        AND ${notBusy('g')}
        AND ${noOlderHolder('g')}
        AND g.held_at IS NULL AND NOT (SELECT pause.paused FROM pause)
      ORDER BY g.priority, g.eligible_at
      LIMIT $2
      FOR NO KEY UPDATE OF g SKIP LOCKED
   ), kept AS (
     ${keptOnePerKey('cand')}
   ), claimed AS (
     ${claimKept({ tidArray: true, returning: '' })}
   ), written AS (
     SELECT extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000 AS exec_ms
       FROM (SELECT count(*) FROM claimed) n
   )
   (SELECT ${ANSWER_COLUMNS},
           NULL::smallint AS head_priority, NULL::float8 AS head_at, NULL::float8 AS db_now,
           NULL::numeric AS exec_ms, NULL::bigint AS pin_xids, NULL::int AS horizon_xids
      FROM pause JOIN claimed c ON true JOIN written ON true
     ORDER BY c.priority, c.eligible_at, c.id)
   UNION ALL
   SELECT ${ANSWER_COLUMNS},
          (SELECT head.priority FROM head),
          (extract(epoch FROM (SELECT head.at FROM head)) * 1000)::float8,
          (extract(epoch FROM now()) * 1000)::float8,
          (SELECT written.exec_ms FROM written),
          (SELECT txid_snapshot_xmax(s) - txid_snapshot_xmin(s) FROM txid_current_snapshot() s),
          CASE WHEN (SELECT written.exec_ms FROM written) >= $9::numeric THEN ${HORIZON_AGE} END
     FROM pause LEFT JOIN claimed c ON false`,
  {
    params: (i: ClaimInput) => [
      i.queue,
      i.limit,
      i.worker,
      i.leaseMs,
      i.gates,
      i.from?.priority ?? LOWEST_PRIORITY,
      i.from?.scanFrom ?? '-infinity',
      i.from?.headFrom ?? '-infinity',
      i.horizonCheckMs ?? null,
    ],
    decode: (rows: readonly (ClaimRecord | EmptyClaimRecord)[], i: ClaimInput): ClaimBatch => {
      const out: ClaimRow[] = [];
      // The trailer (no id) carries the pause, the head and the timing once; it comes last.
      let trailer: EmptyClaimRecord | undefined;
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        if (r.id === null) trailer = r;
        else out.push(claimRow(r, i.worker));
      }
      const head =
        trailer?.head_priority != null && Number.isFinite(trailer.head_at)
          ? { priority: trailer.head_priority, at: new Date(trailer.head_at!) }
          : undefined;
      const dbNow = trailer?.db_now != null ? new Date(trailer.db_now) : new Date();
      const execMs = trailer?.exec_ms != null ? Number(trailer.exec_ms) : 0;
      const pinXids = trailer?.pin_xids != null ? Number(trailer.pin_xids) : 0;
      const horizonXids = trailer?.horizon_xids ?? undefined;
      return {
        rows: out,
        paused: trailer?.paused === true,
        head,
        dbNow,
        execMs,
        pinXids,
        horizonXids,
      };
    },
  },
);

/** The least `smallint`: a start at it (with `-infinity`) is the head of the pick index. */
const LOWEST_PRIORITY = -32768;

/** What PROBE_BEHIND_FLOOR found: the oldest runnable row behind the floor, and its cost. */
export interface BehindFloor {
  /** That row's place, or undefined when none stands behind the floor. */
  readonly head: ClaimHead | undefined;
  /** The statement's server-side time in ms (as CLAIM_RUNNABLE's `exec_ms`). */
  readonly execMs: number;
  /** The horizon's oldest holder, in ids (as CLAIM_RUNNABLE's `horizon_xids`). */
  readonly horizonXids: number;
}

/**
 * The claim floor's look behind itself (docs/design.md §5.3.1), read-only and off the claim
 * loop: the oldest runnable, unheld row of queue `$1` whose place in the pick index's
 * `(priority, eligible_at)` order is before `($2, $3)` (the floor less its slack), in the
 * statement's snapshot, its `eligible_at` capped at `now()`. A LIMIT 1 scan of gen_durable_pick
 * from the head of the queue's range, bounded above by the row comparison: under a pinned
 * horizon it walks the dead entries a full claim would walk (its cost is the floor's budget),
 * but it locks nothing and holds no claim, so the queue's claims go on from the floor while it
 * runs. Always one answer row (`at` NULL for none), carrying the statement's time and, after
 * the scan, the age of the horizon's oldest holder (as CLAIM_RUNNABLE's `horizon_xids`): whether
 * a pin without an id still holds, the looks being rare enough to pay for it.
 */
export const PROBE_BEHIND_FLOOR = sql(
  'probe_behind_floor',
  `SELECT h.priority, (extract(epoch FROM LEAST(h.eligible_at, now())) * 1000)::float8 AS at,
          extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000 AS exec_ms,
          ${HORIZON_AGE} AS horizon_xids
     FROM (SELECT 1) one
     LEFT JOIN LATERAL (
       SELECT g.priority, g.eligible_at
         FROM {schema}.gen_durable g
        WHERE g.queue = $1 AND g.status = 'runnable' AND g.held_at IS NULL
          AND (g.priority, g.eligible_at) < ($2::smallint, $3::timestamptz)
        ORDER BY g.priority, g.eligible_at
        LIMIT 1
     ) h ON true`,
  {
    params: (i: { readonly queue: string; readonly before: ClaimHead }) => [
      i.queue,
      i.before.priority,
      i.before.at,
    ],
    decode: (
      rows: readonly {
        priority: number | null;
        at: number | null;
        exec_ms: string;
        horizon_xids: number;
      }[],
    ): BehindFloor => {
      const r = rows[0];
      return {
        head:
          r?.priority != null && r.at != null
            ? { priority: r.priority, at: new Date(r.at) }
            : undefined,
        execMs: Number(r?.exec_ms ?? 0),
        horizonXids: r?.horizon_xids ?? 0,
      };
    },
  },
);

/**
 * The fair claim (docs/many-tenants.md "Fair claims by key"), one statement, used for a queue
 * that holds fairness keys instead of CLAIM_RUNNABLE; same parameters and the same answer
 * (plus `fair`). Within a queue and priority it serves keys in weighted fair order (virtual
 * time), work-conserving; its cost grows with the batch, not with the backlog nor the number
 * of keys:
 * - heads: the queue's first 2 × `$2` heads of gen_durable_fair_keys in `vtime` order (index
 *   gen_durable_fair_keys_walk), read without a lock: a claim beside another (a poke's beside
 *   a refill, two nodes) walks the same heads and serves the rows the other did not lock. A
 *   lock taken here with SKIP LOCKED made a poke's claim during a refill skip every head the
 *   refill walked (the new key's too) and come back short (docs/many-tenants.md).
 * - probe: per head, its oldest `$2` due, unheld rows by a LATERAL LIMIT probe of
 *   gen_durable_fair_pick (queue, key, priority, eligible_at), then the K = 1 guard of
 *   CLAIM_RUNNABLE on those: the guard runs after the LIMIT, so a key whose rows wait behind one
 *   busy K = 1 key costs `$2` index tuples, never a walk of its backlog (docs/performance.md
 *   "Known limits" #1). Unlocked: only the rows picked below are locked.
 *   The key is matched as `>= key AND <= key` and the rows ordered by key first: an equality
 *   with the head's key (a parameter inside the LATERAL) let the planner walk gen_durable_pick
 *   instead and filter the key, which for a key without due rows behind a 1 000 000-row backlog
 *   of another key read the whole backlog (~0.8 s per head, docs/performance.md "Noisy
 *   neighbour"); an order by the key only gen_durable_fair_pick gives, without a sort, rules
 *   that plan out.
 * - plain: the queue's rows without a key, looked for only among the first 4 × `$2` due rows
 *   of gen_durable_pick (bounded: behind a keyed backlog such a row waits until it reaches the
 *   front), the K = 1 guard applied after that LIMIT as in probe; they count as one more key at
 *   the lowest walked `vtime`, weight 1. With the guard before the LIMIT, the planner costed
 *   the scan as a guard probe per row of the whole backlog (~660 000 at 1 000 000 rows), past
 *   `jit_inline_above_cost`, and JIT compiling took seconds of each claim of a 10 ms statement
 *   (docs/performance.md "Noisy neighbour").
 * - ranked / pick: each candidate's finish time is its key's `vtime` plus the sum of
 *   1 / `fairness_weight` of its key's rows up to it; the batch is the `$2` candidates first by
 *   (priority, finish, eligible_at, id): weighted round robin across keys within a priority.
 * - locked: the picked rows locked by ctid, FOR NO KEY UPDATE SKIP LOCKED, re-checked runnable
 *   and not held (a row another claim took meanwhile is skipped, or fails the re-check), and
 *   passed through the sequence guard (docs/sequences.md; the same probe as CLAIM_RUNNABLE's,
 *   so a row with both keys keeps its key's order in a fair queue too: a held-back row only
 *   makes the batch shorter). The `ctid = ANY (ARRAY(…))` here and in `claimed` pins a TID scan. Without it, claims of ~200
 *   rows (prefetch) on a table whose statistics predated a 1 000 000-row insert ran ~18×
 *   slower (docs/performance.md "Noisy neighbour"), most likely a hash join over a seq scan
 *   of gen_durable (that plan was not captured).
 * - kept / claimed: as CLAIM_RUNNABLE (one row per raw K = 1 key; the lease, claim_seq).
 * - moves / moving / advance: each walked head advances by the cost of the rows it was served;
 *   a head whose probe found nothing due goes behind this round (the largest finish picked,
 *   else the largest walked `vtime`, plus 1), so keys without due work leave the window and an
 *   idle key that gets work again starts level with the others instead of spending a saved-up
 *   credit. `moving` locks those heads FOR NO KEY UPDATE SKIP LOCKED by
 *   gen_durable_fair_keys_pkey (queue, fairness_key): a head another claim holds (it advances
 *   it too) is left to that claim, so no claim waits; this claim's rows of that key go
 *   uncounted (fairness under concurrent claims is approximate, docs/many-tenants.md). A
 *   waiting lock here (in key order, so deadlock-free) made pokes and refills queue behind each
 *   other: B–K's p99 in the noisy-neighbour run went from 15–20 ms to 116–170 ms. The update is
 *   relative to the head's latest version (`vtime + cost`, `GREATEST(vtime, behind)`): a head
 *   another claim updated and committed after this statement's snapshot is locked in its new
 *   version, and both claims' rows count. Heads are named by key, not ctid: a head updated
 *   meanwhile has a new ctid.
 * - pause, enrichment, suspect, trace context, progress: as CLAIM_RUNNABLE.
 */
export const CLAIM_FAIR = sql(
  'claim_fair',
  `WITH pause AS (
     SELECT EXISTS (SELECT 1 FROM {schema}.gen_durable_paused_queues p WHERE p.queue = $1) AS paused
   ), heads AS (
     SELECT f.fairness_key, f.vtime
       FROM {schema}.gen_durable_fair_keys f
      WHERE f.queue = $1 AND NOT (SELECT pause.paused FROM pause)
      ORDER BY f.vtime
      LIMIT $2 * 2
   ), probe AS (
     SELECT h.fairness_key AS fkey, h.vtime, c.*
       FROM heads h
       CROSS JOIN LATERAL (
         SELECT g.tid, g.id, g.priority, g.eligible_at, g.fairness_weight,
                COALESCE(g.concurrency_name = ANY ($5::text[]), false) AS gated
           FROM (SELECT x.ctid AS tid, x.id, x.priority, x.eligible_at, x.fairness_weight,
                        x.concurrency_key, x.concurrency_name
                   FROM {schema}.gen_durable x
                  WHERE x.queue = $1 AND x.fairness_key >= h.fairness_key
                    AND x.fairness_key <= h.fairness_key AND x.status = 'runnable'
                    AND x.eligible_at <= now() AND x.held_at IS NULL
                  ORDER BY x.fairness_key, x.priority, x.eligible_at
                  LIMIT $2) g
          WHERE ${notBusy('g')}
       ) c
   ), plain AS (
     SELECT NULL::text AS fkey, (SELECT min(h.vtime) FROM heads h) AS vtime, c.tid, c.id,
            c.priority, c.eligible_at, 1 AS fairness_weight, c.gated
       FROM (
         SELECT g.tid, g.id, g.priority, g.eligible_at, g.fairness_key,
                COALESCE(g.concurrency_name = ANY ($5::text[]), false) AS gated
           FROM (SELECT x.ctid AS tid, x.id, x.priority, x.eligible_at, x.fairness_key,
                        x.concurrency_key, x.concurrency_name
                   FROM {schema}.gen_durable x
                  WHERE x.queue = $1 AND x.status = 'runnable' AND x.eligible_at <= now()
                    AND x.held_at IS NULL AND NOT (SELECT pause.paused FROM pause)
                  ORDER BY x.priority, x.eligible_at
                  LIMIT $2 * 4) g
          WHERE g.fairness_key IS NULL AND ${notBusy('g')}
       ) c
   ), ranked AS (
     SELECT u.*, COALESCE(u.vtime, 0) + sum(1.0::float8 / u.fairness_weight)
              OVER (PARTITION BY u.fkey ORDER BY u.priority, u.eligible_at, u.id) AS finish
       FROM (SELECT * FROM probe UNION ALL SELECT * FROM plain) u
   ), pick AS (
     SELECT r.tid, r.gated, r.finish
       FROM ranked r
      ORDER BY r.priority, r.finish, r.eligible_at, r.id
      LIMIT $2
   ), locked AS (
     SELECT g.ctid AS tid, g.concurrency_key, g.priority, g.eligible_at, g.id, p.gated
       FROM pick p
       JOIN {schema}.gen_durable g ON g.ctid = p.tid
      WHERE g.ctid = ANY (ARRAY(SELECT p2.tid FROM pick p2))
        AND g.status = 'runnable' AND g.held_at IS NULL AND ${noOlderHolder('g')}
      FOR NO KEY UPDATE OF g SKIP LOCKED
   ), kept AS (
     ${keptOnePerKey('locked')}
   ), claimed AS (
     ${claimKept({ tidArray: true, returning: ', g.fairness_weight' })}
   ), served AS (
     SELECT c.fairness_key, sum(1.0::float8 / c.fairness_weight) AS cost
       FROM claimed c
      WHERE c.fairness_key IS NOT NULL
      GROUP BY c.fairness_key
   ), moves AS (
     SELECT h.fairness_key, s.cost,
            COALESCE((SELECT max(p.finish) FROM pick p), (SELECT max(h2.vtime) FROM heads h2)) + 1
              AS behind
       FROM heads h
       LEFT JOIN served s ON s.fairness_key = h.fairness_key
      WHERE s.cost IS NOT NULL OR NOT EXISTS (SELECT 1 FROM probe pr WHERE pr.fkey = h.fairness_key)
   ), moving AS (
     SELECT f.fairness_key
       FROM {schema}.gen_durable_fair_keys f
      WHERE f.queue = $1 AND f.fairness_key = ANY (ARRAY(SELECT m.fairness_key FROM moves m))
      FOR NO KEY UPDATE OF f SKIP LOCKED
   ), advance AS (
     UPDATE {schema}.gen_durable_fair_keys f
        SET vtime = CASE WHEN m.cost IS NOT NULL THEN f.vtime + m.cost
                         ELSE GREATEST(f.vtime, m.behind) END
       FROM moves m
      WHERE f.queue = $1 AND f.fairness_key = m.fairness_key
        AND f.fairness_key = ANY (ARRAY(SELECT mv.fairness_key FROM moving mv))
      RETURNING 1
   )
   SELECT ${ANSWER_COLUMNS},
          EXISTS (SELECT 1 FROM {schema}.gen_durable_fair_keys f WHERE f.queue = $1) AS fair,
          (SELECT count(*) FROM advance) AS advanced
     FROM pause LEFT JOIN claimed c ON true
    ORDER BY c.priority, c.eligible_at, c.id`,
  {
    params: (i: ClaimInput) => [i.queue, i.limit, i.worker, i.leaseMs, i.gates],
    decode: (rows: readonly (ClaimRecord | EmptyClaimRecord)[], i: ClaimInput): ClaimBatch => {
      const out: ClaimRow[] = [];
      for (let k = 0; k < rows.length; k++) {
        const r = rows[k]!;
        if (r.id !== null) out.push(claimRow(r, i.worker));
      }
      const first = rows[0] as EmptyClaimRecord | undefined;
      return { rows: out, paused: first?.paused === true, fair: first?.fair !== false };
    },
  },
);

/** What INSERT_CLAIMED is asked: the row, and the worker and lease that claim it. */
export interface InsertClaimedInput {
  readonly row: InsertRow;
  readonly worker: string;
  readonly leaseMs: number;
}

/** What INSERT_CLAIMED answers: the claimed row, or the inserted id when the queue is paused. */
export type InsertClaimedAnswer =
  | { readonly kind: 'claimed'; readonly row: ClaimRow }
  /** The queue is paused (gen_durable_paused_queues): written runnable, as INSERT_INSTANCE. */
  | { readonly kind: 'runnable'; readonly id: string; readonly queue: string }
  /** Nothing written: the correlation key is held (a duplicate), as INSERT_INSTANCE. */
  | { readonly kind: 'duplicate' };

/**
 * A local insert that starts at once (docs/design.md §5.5.1 "Inserted claimed"): INSERT_INSTANCE's
 * row (same parameters `$1`…`$22`, the same conflict and dedup guards: no row ⇒ duplicate)
 * written already claimed by worker `$23` with a lease of `$24` ms, `executing` with fencing
 * token 1, as a claim of it would leave it, and answered as a claim answers it (no inbox,
 * children or progress: the row is new). Only for a row the claim would take at once and
 * admit without the limiter: due now, not held, no concurrency key, rate limit, fairness or
 * sequence key (the caller checks). When the queue is paused (a `LIMIT 1` probe of
 * gen_durable_paused_queues_pkey, as the claim's) the row is written `runnable` instead,
 * unclaimed. Indexes: the insert's own (gen_durable_correlation on conflict, gen_durable_dedup
 * for a key), and gen_durable_lease takes the row as any claimed row.
 */
export const INSERT_CLAIMED = sql(
  'insert_claimed',
  `WITH pause AS (
     SELECT EXISTS (SELECT 1 FROM {schema}.gen_durable_paused_queues p WHERE p.queue = $5::text) AS paused
   )
   INSERT INTO {schema}.gen_durable AS g
     ${INSERT_ROW_COLUMNS.replace(/\)$/, ', status, locked_by, lease_expires_at, claim_seq)')}
   ${insertRowSelect(
     0,
     'NULL::bigint',
     `,
            CASE WHEN (SELECT paused FROM pause) THEN 'runnable' ELSE 'executing' END::{schema}.gen_durable_status,
            CASE WHEN NOT (SELECT paused FROM pause) THEN $23::text END,
            CASE WHEN NOT (SELECT paused FROM pause) THEN now() + make_interval(secs => $24::float8 / 1000) END,
            CASE WHEN (SELECT paused FROM pause) THEN 0 ELSE 1 END`,
   )}
   ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
   RETURNING g.id, g.fsm, g.fsm_version AS "fsmVersion", g.step, g.state, g.attempt, g.awaits,
             g.queue, g.priority, g.concurrency_key AS "concurrencyKey",
             g.concurrency_shard AS "concurrencyShard", g.rate_limit AS "rateLimit", g.weight,
             g.claim_seq AS "claimSeq", g.parent_id AS "parentId", false AS gated, g.reaps,
             g.suspect, NULL::json AS inbox, NULL::json AS children,
             g.status <> 'executing' AS paused, g.trace_context AS "traceContext",
             NULL::jsonb AS "lastProgress", g.fairness_key AS "fairnessKey", NULL::text AS worker,
             NULL::text AS "inboxTraceContexts"`,
  {
    params: (i: InsertClaimedInput) => [...insertRowParams(i.row), i.worker, i.leaseMs],
    decode: (rows: readonly ClaimRecord[], i: InsertClaimedInput): InsertClaimedAnswer => {
      const r = rows[0];
      if (r === undefined) return { kind: 'duplicate' };
      if (r.paused) return { kind: 'runnable', id: r.id, queue: r.queue };
      return { kind: 'claimed', row: claimRow(r, i.worker) };
    },
  },
);

/**
 * The sequence guard of candidate alias `g` (docs/sequences.md), as a condition: true for a row
 * without a `sequence_key`, or one no older row of its key (smaller id) holds (live, or failed
 * under `'block'`): a NOT EXISTS probe of gen_durable_sequence that repeats the index's
 * predicate (`holdsKey`), so it is index-only, run only for a row with a key.
 */
function noOlderHolder(g: string): string {
  return `(${g}.sequence_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM {schema}.gen_durable a
                WHERE a.sequence_key = ${g}.sequence_key AND a.id < ${g}.id AND ${holdsKey('a')}))`;
}

/**
 * The K = 1 guard of candidate alias `g` (docs/design.md §5.3), as a condition: true for a row
 * without a key, one a gate of this node admits (`$5`), or one whose key no row executes under
 * the arbiter's predicate (a NOT EXISTS probe of gen_durable_concurrency_active, index-only). The
 * `OFFSET 0` keeps it a per-row probe by key: an EXISTS the planner may simplify becomes
 * `NOT (key = ANY (hashed SubPlan))`, every executing key hashed once per claim.
 */
function notBusy(g: string): string {
  return `(${g}.concurrency_key IS NULL OR COALESCE(${g}.concurrency_name = ANY ($5::text[]), false)
             OR NOT EXISTS (
               SELECT 1 FROM {schema}.gen_durable h
                WHERE h.concurrency_key = ${g}.concurrency_key
                  AND h.status = 'executing' AND h.concurrency_key IS NOT NULL AND h.concurrency_shard IS NULL
               OFFSET 0))`;
}

/**
 * One row per raw K = 1 key among the claim's locked candidates `source` (NULL keys and gated
 * rows all kept), the first in `(priority, eligible_at, id)` order; the others stay runnable.
 */
function keptOnePerKey(source: string): string {
  return `SELECT c.tid, c.gated
       FROM (SELECT c.*, row_number() OVER (PARTITION BY c.concurrency_key
                                            ORDER BY c.priority, c.eligible_at, c.id) AS rn
               FROM ${source} c) c
      WHERE c.concurrency_key IS NULL OR c.gated OR c.rn = 1`;
}

/**
 * The claim's write of the `kept` rows, by ctid (the rows the statement located and locked):
 * `executing`, this worker `$3`, the lease `$4` ms, the gate's shard, the fencing token bumped
 * (docs/design.md §26.1), answering what the step needs. `tidArray` adds `ctid = ANY (ARRAY(…))`,
 * which makes the planner fetch the rows by TID scan where it would otherwise join; `returning`
 * appends columns to the answer.
 */
function claimKept(opts: { readonly tidArray: boolean; readonly returning: string }): string {
  return `UPDATE {schema}.gen_durable g
        SET status = 'executing', locked_by = $3,
            lease_expires_at = now() + make_interval(secs => $4::float8 / 1000),
            concurrency_shard = CASE WHEN kept.gated THEN 0 END,
            claim_seq = g.claim_seq + 1, updated_at = now()
       FROM kept
      WHERE g.ctid = kept.tid${opts.tidArray ? ' AND g.ctid = ANY (ARRAY(SELECT k2.tid FROM kept k2))' : ''}
      RETURNING g.id, g.fsm, g.fsm_version, g.step, g.state, g.attempt, g.awaits, g.queue,
                g.priority, g.eligible_at, g.concurrency_key, g.concurrency_shard, g.rate_limit,
                g.weight, g.claim_seq, g.parent_id, g.signaled, g.reaps, g.suspect, g.trace_context,
                CASE WHEN g.progress->>'step' = g.step THEN g.progress->'value' END AS last_progress,
                kept.gated, g.fairness_key${opts.returning}`;
}

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

/**
 * Every stored child of row alias `r`, in id order, or NULL (gen_durable_parent). The per-row
 * probe runs only when the table holds a child at all: `max(parent_id)` over the partial index
 * gen_durable_parent is one InitPlan a statement (a backward index scan that stops at its first
 * visible entry, the newest parent's children), so the claimed rows of an application without
 * children, or of a table whose children are gone, skip a subplan each (~1–2.5 µs a claimed row
 * on the server, docs/performance.md "What a row's update costs"). The InitPlan reads the
 * statement's snapshot, as the probe does: no child the probe would have seen is missed.
 */
function childrenOf(r: string): string {
  return `CASE WHEN (SELECT max(k0.parent_id) FROM {schema}.gen_durable k0
                      WHERE k0.parent_id IS NOT NULL) IS NOT NULL THEN (
           SELECT json_agg(json_build_object('id', k.id::text, 'fsm', k.fsm, 'status', k.status, 'state', k.state,
                                             'result', k.result, 'last_error', k.last_error) ORDER BY k.id)
             FROM {schema}.gen_durable k
            WHERE k.parent_id = ${r}.id) END`;
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

/**
 * Completes `pg`'s answer row into the ClaimRow in place (see {@link ClaimRecord}): the views
 * of its inbox and children, the worker, and no `lastProgress` for a NULL one.
 */
function claimRow(r: ClaimRecord, worker: string): ClaimRow {
  const rawInbox = r.inbox;
  const row = r as unknown as {
    -readonly [K in keyof ClaimRow]: ClaimRow[K];
  };
  // The same few names on every row: one string each, not one per claimed row (they live as
  // long as the row, which waits in the buffer; docs/performance.md "Allocation per step").
  row.fsm = internedName(r.fsm);
  row.step = internedName(r.step);
  row.queue = internedName(r.queue);
  row.inbox = inboxView(rawInbox);
  row.children = childrenView(r.children);
  row.inboxTraceContexts = inboxTraces(rawInbox);
  row.worker = worker;
  if (r.lastProgress === null) row.lastProgress = undefined;
  return row;
}
