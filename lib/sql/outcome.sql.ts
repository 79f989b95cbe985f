import type { DurableStatus } from '../gen-durable.constants';
import type { KindsWrittenBy } from '../fsm/outcome-kinds';
import { heldClaim } from './held-claim';
import { parentJoinSet } from './parent-join';
import { type IdQueue, type IdQueueStatus, noRows } from './row-decoders';
import { sql } from './statement';

// The flush transaction (docs/design.md §6.3). Every write is guarded by the ownership guard plus the
// fencing token, `heldClaim` (lib/sql/held-claim.ts): locked_by = worker AND status =
// 'executing' AND claim_seq = the claim's seq (docs/design.md §6.1, §26.1). A row that matches nothing was reclaimed: its entry is stale.

/** The guard of every flush write: the claim's worker and fencing token. */
export interface GuardedWrite {
  readonly worker: string;
  readonly id: string;
  readonly seq: string;
}

/** One row's transition (FLUSH_TRANSITIONS): per kind, the columns of docs/design.md §2.4's table. */
export interface TransitionWrite extends GuardedWrite {
  readonly kind: KindsWrittenBy<'transition'>;
  readonly nextStep: string | null;
  readonly stateText: string | null;
  readonly resultText: string | null;
  readonly error: string | null;
  readonly delayMs: number;
  /** `sleep` `{ until }`: the due instant; absent or null otherwise (then `delayMs` counts). */
  readonly at?: Date | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  readonly setKey: boolean;
  readonly concurrencyKey: string | null;
  /** `continue` only: the renewed lease, ms. */
  readonly leaseMs?: number;
  /** The step that ran (FLUSH_TRANSITIONS_RECORDED's history `step`). */
  readonly step?: string;
  /** Its attempt, when known. */
  readonly attempt?: number;
  /** The history mark (`HistoryMark` of lib/runtime/flush-entry.ts); absent = 0. */
  readonly history?: 0 | 1 | 2 | 3;
  /** A thrown error, history JSON text. */
  readonly thrown?: string | null;
}

interface TransitionRecord {
  id: string;
  parent_id: string | null;
  status: DurableStatus;
  queue: string;
  signaled: boolean;
  held: boolean;
}

/** A row FLUSH_TRANSITIONS wrote: its status after, and whether it was ever signaled. */
export interface TransitionRow {
  readonly id: string;
  readonly parentId: string | null;
  readonly status: DurableStatus;
  readonly queue: string;
  readonly signaled: boolean;
  /** Solo only: left as it was (a cancel request that needs riders); not committed. */
  readonly held: boolean;
}

/** A row a park or a fan-out park wrote: its status after (`cancelled` for a cancel request). */
export interface EndedRow {
  readonly id: string;
  readonly queue: string;
  readonly status: DurableStatus;
  readonly parentId: string | null;
  readonly signaled: boolean;
}

function decodeEnded(
  rows: readonly {
    id: string;
    queue: string;
    status: DurableStatus;
    parent_id: string | null;
    signaled: boolean;
  }[],
): EndedRow[] {
  const out: EndedRow[] = [];
  for (const r of rows) {
    out.push({
      id: r.id,
      queue: r.queue,
      status: r.status,
      parentId: r.parent_id,
      signaled: r.signaled,
    });
  }
  return out;
}

/** One row's park (FLUSH_PARKS). */
export interface ParkWrite extends GuardedWrite {
  readonly nextStep: string;
  readonly stateText: string;
  readonly names: readonly string[];
  readonly timeoutMs: number | null;
}

/** A signal presented to a step: its target row and its id. */
export interface SignalPair {
  readonly targetId: string;
  readonly signalId: string;
}

/** One parent's park on its children (FANOUT_PARK_PARENTS). */
export interface FanOutParkWrite extends GuardedWrite {
  readonly nextStep: string;
  readonly stateText: string;
}

/**
 * A solo flush cannot end a row whose cancel was requested when that row needs a rider (a
 * parent to join, an inbox to sweep): it holds it — the row is left exactly as it was, still
 * executing — and the flusher commits it in a transaction with its riders. It holds a row whose
 * FSM records cancels in its history too (solo code 2, docs/design.md §28.1) when the
 * statement is the plain one: its history row is written by that transaction.
 */
const HELD = `(COALESCE(t.solo, 0) > 0 AND g.cancel_requested_at IS NOT NULL AND t.kind NOT IN ('done', 'stop')
               AND (t.solo = 2 OR g.parent_id IS NOT NULL OR g.signaled))`;

/**
 * The kind a transition commits as (docs/design.md §27.2): the entry's own, except that a row
 * whose cancel was requested while its step ran ends `cancel` unless the step's outcome was
 * itself terminal (done, stop: a terminal outcome wins), or is `hold` (see HELD). Read on the
 * row's locked version, so a request that commits before this flush's row lock is always seen.
 */
const KIND = `(CASE WHEN g.cancel_requested_at IS NULL OR t.kind IN ('done', 'stop') THEN t.kind
                    WHEN ${HELD} THEN 'hold' ELSE 'cancel' END)`;

/**
 * Transitions next / retry / throttle / sleep / done / stop for any number of rows in one UPDATE over
 * parallel arrays (PK lookups, pinned by `g.id = ANY ($2)` and by the guard `heldClaim`, whose
 * `g.status::text = 'executing'` does not imply gen_durable_lease's predicate: with the
 * plain guard the planner read the executing rows through gen_durable_lease, even with the ids
 * given, and under a pinned xmin horizon that index holds a dead entry for every claim since
 * the pin; the same pin serves every statement below that names its rows by id, and HEARTBEAT
 * and RELEASE_CLAIMS). Per-row kind drives each column as in docs/design.md §2.4's table;
 * `last_error` is written by a stop, and by a retry that carries an error (a thrown step
 * retried). Every outcome
 * clears the claim and the drawn shard and resets `reaps` and `suspect` (a committed outcome
 * proves the step does not kill its worker, §26.5). RETURNING defines what committed.
 * `throttle` (docs/design.md §16.5) is a `retry` that keeps the state and spends no attempt:
 * same step, state and attempt, due `delay_ms` after now(); a thrown error's text goes to
 * `last_error` (a thrown `retryAfterMs`).
 * `sleep` (docs/design.md §27.4) is a `next` due later and without limit options: new step and
 * state, attempt 0, the key kept, the rate limit cleared, due at `at` when given (an instant,
 * `{ until }`), else `delay_ms` after now() (`{ for }`, database clock).
 * `cancel` (docs/design.md §27.2) ends the row `cancelled` keeping its step, state and
 * attempt: the step's own outcome is dropped, and the request's reason stays on the row. Any
 * non-terminal entry of a row whose cancel was requested commits as `cancel` (see KIND); in
 * a solo flush such a row that needs a rider is held instead (`held` in RETURNING, see HELD).
 * `continue` is the inline hand-off (docs/design.md §7): a `next` that keeps the claim — the row stays
 * executing under the same worker and fencing token, its lease renewed to now + `lease_ms`;
 * the shard is kept with the key, cleared with it, or provisionally 0 for a new gated key
 * (admission, after this commit, stamps the drawn one).
 * `solo` (per row, NULL = 0; 2 also holds a cancel, see HELD): the flush is this statement alone, in autocommit (no rider
 * can be needed), so a terminal must not land on a row that was ever `signaled` — its inbox
 * sweep would be missing.
 * Such a row matches nothing here and the flusher commits it in a transaction with the sweep.
 * `signaled` is returned (read under the row lock) so a transaction sweeps only the inboxes
 * that can hold anything. PK lookups; the row lock makes the flag exact: a delivery that
 * committed first set it, one that waits on this lock finds a terminal row and stores nothing.
 */
function transitionsUpdate(recorded: boolean): string {
  return `UPDATE {schema}.gen_durable g
      SET status = (CASE ${KIND} WHEN 'done' THEN 'done' WHEN 'stop' THEN 'failed' WHEN 'cancel' THEN 'cancelled'
                                WHEN 'continue' THEN 'executing' WHEN 'hold' THEN 'executing'
                                ELSE 'runnable' END)::{schema}.gen_durable_status,
          step = CASE WHEN ${KIND} IN ('next', 'continue', 'sleep') THEN t.step ELSE g.step END,
          attempt = CASE ${KIND} WHEN 'next' THEN 0 WHEN 'continue' THEN 0 WHEN 'sleep' THEN 0
                                 WHEN 'retry' THEN g.attempt + 1 ELSE g.attempt END,
          state = CASE WHEN ${KIND} IN ('next', 'retry', 'continue', 'sleep') THEN t.state::jsonb ELSE g.state END,
          result = CASE WHEN ${KIND} = 'done' THEN t.result::jsonb ELSE g.result END,
          last_error = CASE WHEN ${KIND} = 'stop' OR (${KIND} IN ('retry', 'throttle') AND t.error IS NOT NULL) THEN t.error ELSE g.last_error END,
          awaits = CASE WHEN ${KIND} IN ('retry', 'throttle', 'hold') THEN g.awaits END,
          await_deadline = NULL,
          rate_limit = CASE WHEN ${KIND} IN ('next', 'continue', 'sleep') THEN t.rate_limit ELSE g.rate_limit END,
          weight = CASE WHEN ${KIND} IN ('next', 'continue', 'sleep') THEN t.weight ELSE g.weight END,
          concurrency_key = CASE WHEN ${KIND} IN ('next', 'continue') AND t.set_key THEN t.conc_key ELSE g.concurrency_key END,
          eligible_at = CASE ${KIND} WHEN 'next' THEN now() WHEN 'continue' THEN now()
                                    WHEN 'retry' THEN now() + make_interval(secs => t.delay_ms / 1000)
                                    WHEN 'throttle' THEN now() + make_interval(secs => t.delay_ms / 1000)
                                    WHEN 'sleep' THEN COALESCE(t.at, now() + make_interval(secs => t.delay_ms / 1000))
                                    ELSE g.eligible_at END,
          locked_by = CASE WHEN ${KIND} IN ('continue', 'hold') THEN g.locked_by END,
          lease_expires_at = CASE ${KIND} WHEN 'continue' THEN now() + make_interval(secs => t.lease_ms / 1000)
                                          WHEN 'hold' THEN g.lease_expires_at END,
          concurrency_shard = CASE WHEN ${KIND} = 'hold' THEN g.concurrency_shard
                                   WHEN ${KIND} <> 'continue' THEN NULL
                                   WHEN NOT t.set_key THEN g.concurrency_shard
                                   WHEN t.conc_key IS NULL THEN NULL
                                   ELSE 0 END,
          reaps = CASE WHEN ${KIND} = 'hold' THEN g.reaps ELSE 0 END,
          suspect = CASE WHEN ${KIND} = 'hold' THEN g.suspect ELSE false END,
          updated_at = CASE WHEN ${KIND} = 'hold' THEN g.updated_at ELSE now() END
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
                 $8::text[], $9::float8[], $10::text[], $11::float8[], $12::boolean[], $13::text[], $14::float8[],
                 $15::int[], $16::timestamptz[]${recorded ? ', $17::int[], $18::text[], $19::int[], $20::text[]' : ''})
          AS t(worker, id, seq, kind, step, state, result, error, delay_ms, rate_limit, weight, set_key, conc_key, lease_ms, solo, at${recorded ? ', mark, ran_step, ran_attempt, thrown' : ''})
    WHERE g.id = ANY ($2::bigint[]) AND g.id = t.id AND ${heldClaim('g', 't.worker', 't.seq')}
      AND NOT (COALESCE(t.solo, 0) > 0 AND ${KIND} IN ('done', 'stop', 'cancel') AND g.signaled)
    RETURNING g.id, g.parent_id, g.status, g.queue, g.signaled, ${HELD} AS held`;
}

/** The inputs of FLUSH_TRANSITIONS and FLUSH_TRANSITIONS_RECORDED. */
export interface TransitionsFlush {
  readonly entries: readonly TransitionWrite[];
  readonly solo: boolean;
}

/** The transitions of a flush (see transitionsUpdate), when none of them is to be recorded. */
export const FLUSH_TRANSITIONS = sql('flush_transitions', transitionsUpdate(false), {
  params: transitionParams,
  decode: decodeTransitions,
});

/**
 * FLUSH_TRANSITIONS for a batch whose entries are all `done` and none recorded (a drain's
 * flush): the same rows, guard and RETURNING, with the SET list a `done` entry amounts to in
 * FLUSH_TRANSITIONS, without its per-kind CASEs, and four arrays instead of sixteen. A `done`
 * is terminal, so it commits as `done` whether or not the row's cancel was requested (KIND) and
 * is never held (HELD); in a solo flush (`$5`) it skips a row that was ever signaled, as
 * FLUSH_TRANSITIONS does. The CASEs cost 10–14 % of that statement's server time on a batch of
 * `done` entries (docs/performance.md, "What a row's update costs"; `npm run profile:flush-set`).
 * PK lookups, pinned by `g.id = ANY ($2)` and the guard, as FLUSH_TRANSITIONS.
 */
export const FLUSH_DONE = sql(
  'flush_done',
  `UPDATE {schema}.gen_durable g
      SET status = 'done', result = t.result::jsonb, awaits = NULL, await_deadline = NULL,
          locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, reaps = 0,
          suspect = false, updated_at = now()
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) AS t(worker, id, seq, result)
    WHERE g.id = ANY ($2::bigint[]) AND g.id = t.id AND ${heldClaim('g', 't.worker', 't.seq')}
      AND NOT ($5::boolean AND g.signaled)
    RETURNING g.id, g.parent_id, g.status, g.queue, g.signaled, false AS held`,
  {
    params: ({ entries, solo }: TransitionsFlush): unknown[] => {
      const n = entries.length;
      const workers = new Array<string>(n);
      const ids = new Array<string>(n);
      const seqs = new Array<string>(n);
      const results = new Array<string | null>(n);
      for (let i = 0; i < n; i++) {
        const e = entries[i]!;
        workers[i] = e.worker;
        ids[i] = e.id;
        seqs[i] = e.seq;
        results[i] = e.resultText;
      }
      return [workers, ids, seqs, results, solo];
    },
    decode: decodeTransitions,
  },
);

/**
 * FLUSH_TRANSITIONS with its history rows (docs/design.md §28.1), used when an entry of the
 * flush must be recorded (history mark ≥ 2): one statement still — the UPDATE in a
 * data-modifying CTE, the history INSERT reading its RETURNING — so a history row exists
 * exactly when its outcome committed, in a solo flush too. Recorded: rows of mark ≥ 2, and of
 * mark 1 that ended `cancelled`; never a held row. The committed kind is the row's KIND
 * (`continue` recorded as `next`, `cancel` as `cancelled`); `step` / `attempt` are those of the
 * step that ran; `error` is the thrown error, else a stop's or a retried job's reason as
 * `{ name: 'reason', message, stack: null }`; `state` (mark 3) the committed state. PK lookups
 * for the UPDATE, one insert per recorded row (index gen_durable_history_instance).
 */
export const FLUSH_TRANSITIONS_RECORDED = sql(
  'flush_transitions_recorded',
  `WITH u AS (
     ${transitionsUpdate(true)}, ${KIND} AS k, t.worker, t.seq, t.step AS to_step, t.mark, t.ran_step,
              t.ran_attempt, t.thrown, t.error AS reason, CASE WHEN t.mark = 3 THEN g.state END AS committed_state
   ), h AS (
     INSERT INTO {schema}.gen_durable_history
            (instance_id, kind, step, next_step, attempt, claim_seq, worker, outcome, error, state)
     SELECT u.id, CASE u.k WHEN 'continue' THEN 'next' WHEN 'cancel' THEN 'cancelled' ELSE u.k END,
            u.ran_step, CASE WHEN u.k IN ('next', 'continue', 'sleep') THEN u.to_step END,
            u.ran_attempt, u.seq, u.worker, u.status::text,
            COALESCE(u.thrown::jsonb, CASE WHEN u.k IN ('stop', 'retry') AND u.reason IS NOT NULL
                                           THEN jsonb_build_object('name', 'reason', 'message', u.reason, 'stack', NULL) END),
            u.committed_state
       FROM u
      WHERE NOT u.held AND (u.mark >= 2 OR (u.mark = 1 AND u.k = 'cancel'))
   )
   SELECT id, parent_id, status, queue, signaled, held FROM u`,
  {
    params: (input: TransitionsFlush): unknown[] => {
      const values = transitionParams(input, true);
      const { entries } = input;
      const n = entries.length;
      const marks = new Array<number>(n);
      const ranSteps = new Array<string | null>(n);
      const attempts = new Array<number | null>(n);
      const thrown = new Array<string | null>(n);
      for (let i = 0; i < n; i++) {
        const e = entries[i]!;
        marks[i] = e.history ?? 0;
        ranSteps[i] = e.step ?? null;
        attempts[i] = e.attempt ?? null;
        thrown[i] = e.thrown ?? null;
      }
      values.push(marks, ranSteps, attempts, thrown);
      return values;
    },
    decode: decodeTransitions,
  },
);

/**
 * FLUSH_TRANSITIONS' parameters. `solo` per row: 0 in a transaction, 1 alone in autocommit,
 * 2 alone and its cancel must be held (the plain statement, an FSM that records cancels).
 */
function transitionParams({ entries, solo }: TransitionsFlush, recorded = false): unknown[] {
  // Preallocated and filled by index: this runs once per flush on the drain's hot path.
  const n = entries.length;
  const workers = new Array<string>(n);
  const ids = new Array<string>(n);
  const seqs = new Array<string>(n);
  const kinds = new Array<string>(n);
  const steps = new Array<string | null>(n);
  const states = new Array<string | null>(n);
  const results = new Array<string | null>(n);
  const errors = new Array<string | null>(n);
  const delays = new Array<number>(n);
  const rateLimits = new Array<string | null>(n);
  const weights = new Array<number>(n);
  const setKeys = new Array<boolean>(n);
  const keys = new Array<string | null>(n);
  const leases = new Array<number | null>(n);
  const solos = new Array<number>(n);
  const ats = new Array<Date | null>(n);
  for (let i = 0; i < n; i++) {
    const e = entries[i]!;
    workers[i] = e.worker;
    ids[i] = e.id;
    seqs[i] = e.seq;
    kinds[i] = e.kind;
    steps[i] = e.nextStep;
    states[i] = e.stateText;
    results[i] = e.resultText;
    errors[i] = e.error;
    delays[i] = e.delayMs;
    rateLimits[i] = e.rateLimit;
    weights[i] = e.weight;
    setKeys[i] = e.setKey;
    keys[i] = e.concurrencyKey;
    leases[i] = e.kind === 'continue' ? (e.leaseMs ?? null) : null;
    solos[i] = solo ? (!recorded && e.history === 1 ? 2 : 1) : 0;
    ats[i] = e.at ?? null;
  }
  return [
    workers,
    ids,
    seqs,
    kinds,
    steps,
    states,
    results,
    errors,
    delays,
    rateLimits,
    weights,
    setKeys,
    keys,
    leases,
    solos,
    ats,
  ];
}

function decodeTransitions(rows: readonly TransitionRecord[]): TransitionRow[] {
  const out: TransitionRow[] = [];
  for (const r of rows) {
    out.push({
      id: r.id,
      parentId: r.parent_id,
      status: r.status,
      queue: r.queue,
      signaled: r.signaled,
      held: r.held,
    });
  }
  return out;
}

/**
 * awaitSignal parks (docs/design.md §2.4, §8): awaits from a per-row JSON array text, deadline from a
 * per-row timeout (NULL = none). The lost-wakeup recheck runs next in the same transaction.
 * A row whose cancel was requested while its step ran ends `cancelled` instead, step and
 * state kept (docs/design.md §27.2); the flusher gives it a terminal's riders.
 */
export const FLUSH_PARKS = sql(
  'flush_parks',
  `UPDATE {schema}.gen_durable g
      SET status = (CASE WHEN g.cancel_requested_at IS NULL THEN 'awaiting_signal' ELSE 'cancelled' END)::{schema}.gen_durable_status,
          step = CASE WHEN g.cancel_requested_at IS NULL THEN t.step ELSE g.step END,
          attempt = CASE WHEN g.cancel_requested_at IS NULL THEN 0 ELSE g.attempt END,
          state = CASE WHEN g.cancel_requested_at IS NULL THEN t.state::jsonb ELSE g.state END,
          awaits = CASE WHEN g.cancel_requested_at IS NULL THEN ARRAY(SELECT jsonb_array_elements_text(t.names::jsonb)) END,
          await_deadline = CASE WHEN t.timeout_ms IS NULL OR g.cancel_requested_at IS NOT NULL THEN NULL
                                ELSE now() + make_interval(secs => t.timeout_ms / 1000) END,
          rate_limit = NULL, weight = 1, eligible_at = now(),
          locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, reaps = 0, suspect = false, updated_at = now()
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::float8[])
          AS t(worker, id, seq, step, state, names, timeout_ms)
    WHERE g.id = ANY ($2::bigint[]) AND g.id = t.id AND ${heldClaim('g', 't.worker', 't.seq')}
    RETURNING g.id, g.queue, g.status, g.parent_id, g.signaled`,
  {
    params: ({ entries }: { readonly entries: readonly ParkWrite[] }) => {
      const workers: string[] = [];
      const ids: string[] = [];
      const seqs: string[] = [];
      const steps: string[] = [];
      const states: string[] = [];
      const names: string[] = [];
      const timeouts: (number | null)[] = [];
      for (const e of entries) {
        workers.push(e.worker);
        ids.push(e.id);
        seqs.push(e.seq);
        steps.push(e.nextStep);
        states.push(e.stateText);
        names.push(JSON.stringify(e.names));
        timeouts.push(e.timeoutMs);
      }
      return [workers, ids, seqs, steps, states, names, timeouts];
    },
    decode: decodeEnded,
  },
);

/**
 * Lost-wakeup recheck (docs/design.md §8.4) over the just-parked ids `$1`: flip to runnable a row whose
 * unconsumed inbox (gen_durable_signals_inbox) holds a signal named in its awaits that was not presented
 * to the parking step. Presented signals travel as (target, id) pairs `$2`/`$3`: per-row
 * exclusion, not a watermark, because signal ids commit out of order.
 */
export const RECHECK_PARKS = sql(
  'recheck_parks',
  `UPDATE {schema}.gen_durable g
      SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
    WHERE g.id = ANY ($1::bigint[]) AND g.status = 'awaiting_signal'
      AND EXISTS (
        SELECT 1 FROM {schema}.gen_durable_signals s
         WHERE s.target_id = g.id AND s.consumed_at IS NULL AND s.name = ANY (g.awaits)
           AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::bigint[]) AS p(target_id, signal_id)
                            WHERE p.target_id = s.target_id AND p.signal_id = s.id))
    RETURNING g.id, g.queue`,
  {
    params: (i: {
      readonly parkedIds: readonly string[];
      readonly presented: readonly SignalPair[];
    }) => {
      const targets: string[] = [];
      const signals: string[] = [];
      for (const p of i.presented) {
        targets.push(p.targetId);
        signals.push(p.signalId);
      }
      return [i.parkedIds, targets, signals];
    },
    decode: (rows: readonly IdQueue[]) => rows,
  },
);

/** Consumes exactly the presented (target, signal) pairs of committed progressing entries (§8.3). */
export const CONSUME_SIGNALS = sql(
  'consume_signals',
  `UPDATE {schema}.gen_durable_signals s
      SET consumed_at = now()
     FROM unnest($1::bigint[], $2::bigint[]) AS p(target_id, signal_id)
    WHERE s.id = p.signal_id AND s.target_id = p.target_id AND s.consumed_at IS NULL`,
  {
    params: ({ pairs }: { readonly pairs: readonly SignalPair[] }) => {
      const targets: string[] = [];
      const signals: string[] = [];
      for (const p of pairs) {
        targets.push(p.targetId);
        signals.push(p.signalId);
      }
      return [targets, signals];
    },
    decode: noRows,
  },
);

/** Consumes the whole inbox of committed terminal entries that were ever signaled (§8.3). Index gen_durable_signals_inbox. */
export const CONSUME_INBOXES = sql(
  'consume_inboxes',
  `UPDATE {schema}.gen_durable_signals
      SET consumed_at = now()
    WHERE target_id = ANY ($1::bigint[]) AND consumed_at IS NULL`,
  { params: (i: { readonly ids: readonly string[] }) => [i.ids], decode: noRows },
);

/**
 * Flush lock order (docs/design.md §6.3 step 0): before its first write, a flush transaction
 * whose rows span several statements or may join a parent locks, in one pass in id order, its
 * own rows `$1` and the parents it may decrement: those of `$2` (entries whose outcome is
 * terminal) and of any of its rows whose cancel was requested (such a row ends `cancelled`
 * whatever its outcome, §27.2). Cancel, retry and this lock all take instance rows in one
 * ascending pass, and the reaper only skip-locks, so none of them can wait on each other in a
 * cycle: without it a flush held its child while it waited for the parent that a cancel of the
 * child, holding the parent, was waiting to take the child after. The parents are read without
 * a lock first; a cancel request committed after that read leaves its parent to the join's own
 * lock (still in id order among parents). PK lookups (gen_durable_pkey).
 */
export const LOCK_FLUSH_ROWS = sql(
  'lock_flush_rows',
  `WITH b AS (
     SELECT id, parent_id, cancel_requested_at IS NOT NULL AS requested
       FROM {schema}.gen_durable WHERE id = ANY ($1::bigint[])
   )
   SELECT g.id FROM {schema}.gen_durable g
    WHERE g.id = ANY ($1::bigint[])
       OR g.id = ANY (ARRAY(SELECT b.parent_id FROM b
                             WHERE b.parent_id IS NOT NULL AND (b.requested OR b.id = ANY ($2::bigint[]))))
    ORDER BY g.id
      FOR NO KEY UPDATE OF g`,
  {
    params: (i: { readonly ids: readonly string[]; readonly terminalIds: readonly string[] }) => [
      i.ids,
      i.terminalIds,
    ],
    decode: noRows,
  },
);

/**
 * Child join (docs/design.md §6.3 step 5): `$1` = parent id of each terminal child (repeats count).
 * Parents are locked in id order, decremented once by their count; one at ≤ 0 while
 * awaiting_children becomes runnable, eligible now. Returns the parents woken.
 */
export const JOIN_PARENTS = sql(
  'join_parents',
  `WITH d AS (
     SELECT pid, count(*)::int AS n FROM unnest($1::bigint[]) AS pid GROUP BY pid
   ), locked AS (
     SELECT p.id FROM {schema}.gen_durable p JOIN d ON d.pid = p.id ORDER BY p.id FOR NO KEY UPDATE OF p
   )
   UPDATE {schema}.gen_durable p
      SET ${parentJoinSet('d.n')}
     FROM d JOIN locked ON locked.id = d.pid
    WHERE p.id = d.pid
    RETURNING p.id, p.queue, p.status`,
  {
    params: (i: { readonly parentIds: readonly string[] }) => [i.parentIds],
    decode: (rows: readonly IdQueueStatus[]) => rows,
  },
);

/**
 * Fan-out step 1 (docs/design.md §6.3, §10): lock the spawning parents in id order, guarded, so the
 * reaper (skip-locked) cannot reclaim a parent mid-spawn. Returns the parents still owned, and
 * whether a cancel was requested for each, read under the lock: such a parent spawns nothing
 * (docs/design.md §27.2, the guarded spawn) and FANOUT_PARK_PARENTS ends it `cancelled`. A
 * cancel that commits after this lock waits for the flush and sees the children.
 */
export const FANOUT_LOCK_PARENTS = sql(
  'fanout_lock_parents',
  `SELECT g.id, g.cancel_requested_at IS NOT NULL AS cancel_requested
     FROM {schema}.gen_durable g
     JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS t(worker, id, seq) ON g.id = t.id
    WHERE g.id = ANY ($2::bigint[]) AND ${heldClaim('g', 't.worker', 't.seq')}
    ORDER BY g.id
      FOR NO KEY UPDATE OF g`,
  {
    params: ({ entries }: { readonly entries: readonly GuardedWrite[] }) => {
      const workers: string[] = [];
      const ids: string[] = [];
      const seqs: string[] = [];
      for (const e of entries) {
        workers.push(e.worker);
        ids.push(e.id);
        seqs.push(e.seq);
      }
      return [workers, ids, seqs];
    },
    decode: (
      rows: readonly { id: string; cancel_requested: boolean }[],
    ): { id: string; cancelRequested: boolean }[] => {
      const out: { id: string; cancelRequested: boolean }[] = [];
      for (const r of rows) out.push({ id: r.id, cancelRequested: r.cancel_requested });
      return out;
    },
  },
);

/**
 * Fan-out step 3: park each owned parent on its landed children (duplicates by key dropped
 * out of the count); zero landed ⇒ straight to runnable. A parent whose cancel was requested
 * (it spawned nothing) ends `cancelled`, step and state kept (docs/design.md §27.2).
 */
export const FANOUT_PARK_PARENTS = sql(
  'fanout_park_parents',
  `UPDATE {schema}.gen_durable g
      SET status = (CASE WHEN g.cancel_requested_at IS NOT NULL THEN 'cancelled'
                         WHEN t.landed > 0 THEN 'awaiting_children' ELSE 'runnable' END)::{schema}.gen_durable_status,
          step = CASE WHEN g.cancel_requested_at IS NULL THEN t.step ELSE g.step END,
          attempt = CASE WHEN g.cancel_requested_at IS NULL THEN 0 ELSE g.attempt END,
          state = CASE WHEN g.cancel_requested_at IS NULL THEN t.state::jsonb ELSE g.state END,
          awaits = NULL, await_deadline = NULL,
          children_pending = CASE WHEN g.cancel_requested_at IS NULL THEN t.landed ELSE g.children_pending END,
          rate_limit = NULL, weight = 1, eligible_at = now(),
          locked_by = NULL, lease_expires_at = NULL, concurrency_shard = NULL, reaps = 0, suspect = false,
          updated_at = now()
     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::int[])
          AS t(worker, id, seq, step, state, landed)
    WHERE g.id = ANY ($2::bigint[]) AND g.id = t.id AND ${heldClaim('g', 't.worker', 't.seq')}
    RETURNING g.id, g.queue, g.status, g.parent_id, g.signaled`,
  {
    params: (i: {
      readonly entries: readonly FanOutParkWrite[];
      /** Children that landed, per parent id (none = 0). */
      readonly landed: ReadonlyMap<string, number>;
    }) => {
      const workers: string[] = [];
      const ids: string[] = [];
      const seqs: string[] = [];
      const steps: string[] = [];
      const states: string[] = [];
      const landed: number[] = [];
      for (const e of i.entries) {
        workers.push(e.worker);
        ids.push(e.id);
        seqs.push(e.seq);
        steps.push(e.nextStep);
        states.push(e.stateText);
        landed.push(i.landed.get(e.id) ?? 0);
      }
      return [workers, ids, seqs, steps, states, landed];
    },
    decode: decodeEnded,
  },
);
