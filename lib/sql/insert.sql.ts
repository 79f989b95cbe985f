import type { PoolClient } from 'pg';

import type { InsertRow } from '../instance/insert-row';
import { sql, type StatementRunner } from './statement';

/** A row INSERT_INSTANCE wrote: its id, its queue, and whether it is due now (poke it). */
export interface InsertedInstance {
  readonly id: string;
  readonly queue: string;
  readonly due: boolean;
}

/** The rows of one INSERT_INSTANCES, each with its parent (children) or none. */
export interface InsertManyInput {
  readonly rows: readonly InsertRow[];
  /** Per row, by index; absent or shorter = no parent. */
  readonly parentIds?: readonly (string | null)[];
}

interface InsertedRecord {
  id: string;
  queue: string;
  correlation_key: string | null;
  parent_id: string | null;
  due: boolean;
  ord: number;
}

/** A row INSERT_INSTANCES wrote; `ord` is its index in the input (a missing index was a duplicate). */
export interface InsertedEntry extends InsertedInstance {
  readonly correlationKey: string | null;
  readonly parentId: string | null;
  readonly ord: number;
}

/** A row INSERT_INSTANCE_OR_HOLDER answered: `inserted`, or the key's holder (`due` false). */
export interface InsertedOrHolder extends InsertedInstance {
  readonly inserted: boolean;
}

/** `$16` of INSERT_INSTANCES when no entry carries a trace context: unnest pads it with NULLs. */
const NO_TRACES: readonly (string | null)[] = Object.freeze([]);
/** `$17` / `$18` of INSERT_INSTANCES when no entry has a deadline, `$19` / `$20` no hold / window. */
const NO_DEADLINES: readonly null[] = Object.freeze([]);

/**
 * The `$1`…`$22` of INSERT_INSTANCE and INSERT_INSTANCE_OR_HOLDER, in column order: `$15`
 * held, `$16` the dedup window in ms or NULL (docs/identity.md "Dedup windows"), `$17` the
 * absolute deadline or NULL, else `$18` the deadline in ms from now or NULL
 * (docs/operations-control.md "Instance deadlines"), `$19` the fairness key or NULL and `$20`
 * its weight (docs/many-tenants.md "Fair claims by key"), `$21` the sequence key or NULL and
 * `$22` its failure policy or NULL (docs/sequences.md).
 */
export function insertRowParams(row: InsertRow): unknown[] {
  return [
    row.fsm,
    row.fsmVersion,
    row.step,
    row.stateText,
    row.queue,
    row.priority,
    row.at,
    row.delayMs,
    row.correlationKey,
    row.scope,
    row.concurrencyKey,
    row.rateLimit,
    row.weight,
    row.traceContext ?? null,
    row.held === true,
    row.dedupWindowMs ?? null,
    row.deadlineAt ?? null,
    row.deadlineInMs ?? null,
    row.fairnessKey ?? null,
    row.fairnessWeight ?? 1,
    row.sequenceKey ?? null,
    row.onHeadFailure ?? null,
  ];
}

/** The column list every single-row insert writes, in the order of {@link insertRowSelect}. */
export const INSERT_ROW_COLUMNS = `(fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_key,
      correlation_scope, concurrency_key, rate_limit, weight, trace_context, held_at, dedup_until,
      deadline_at, fairness_key, fairness_weight, sequence_key, on_head_failure)`;

/**
 * The SELECT list of one row from the parameters of {@link insertRowParams}, numbered from
 * `$(base + 1)` (a statement whose own parameters come first shifts them), with the dedup
 * window guard (docs/identity.md "Dedup windows"): no row when another instance with the key
 * still has an open window (index gen_durable_dedup), `except` an id the statement itself ends
 * (a replace's occupant). Explicit casts: an INSERT … SELECT infers no type from its columns.
 * `extra` appends select items (a statement that writes more columns lists them after these).
 */
export function insertRowSelect(base: number, except = 'NULL::bigint', extra = ''): string {
  const p = (n: number): string => `$${base + n}`;
  return `SELECT ${p(1)}::text, ${p(2)}::int, ${p(3)}::text, ${p(4)}::text::jsonb, ${p(5)}::text, ${p(6)}::smallint,
            COALESCE(${p(7)}::timestamptz, now() + make_interval(secs => ${p(8)}::float8 / 1000)),
            ${p(9)}::text, string_to_array(${p(10)}::text, ',')::{schema}.gen_durable_status[], ${p(11)}::text,
            ${p(12)}::text, ${p(13)}::float8, ${p(14)}::text, CASE WHEN ${p(15)}::boolean THEN now() END,
            now() + make_interval(secs => ${p(16)}::float8 / 1000),
            COALESCE(${p(17)}::timestamptz, now() + make_interval(secs => ${p(18)}::float8 / 1000)),
            ${p(19)}::text, ${p(20)}::int, ${p(21)}::text, ${p(22)}::text${extra}
      WHERE (${p(9)}::text IS NULL OR NOT EXISTS (
              SELECT 1 FROM {schema}.gen_durable d
               WHERE d.correlation_key = ${p(9)}::text AND d.dedup_until > now()
                 AND d.id IS DISTINCT FROM ${except}))`;
}

/**
 * The holder of key `$(base + 9)` a single-row insert did not insert over: the occupant
 * (gen_durable_correlation), else an instance whose dedup window is open (gen_durable_dedup).
 * Reads the statement's snapshot.
 */
export function keyHolderSelect(base: number): string {
  const key = `$${base + 9}::text`;
  return `(SELECT g.id, g.queue FROM {schema}.gen_durable g WHERE g.correlation_guard = ${key}
           UNION ALL
           SELECT g.id, g.queue FROM {schema}.gen_durable g
            WHERE g.correlation_key = ${key} AND g.dedup_until > now()
           LIMIT 1)`;
}

/**
 * One instance. `$4` state is JSON text cast server-side; `$7` an absolute start time or
 * NULL, else now() + `$8` ms (DB clock); `$10` the correlation scope comma-joined.
 * `$14` the W3C trace context of the inserting code or NULL (docs/design.md §31); `$15` held,
 * `$16` dedup window ms or NULL, `$17`/`$18` the deadline, `$19`/`$20` the sequence key and
 * policy ({@link insertRowParams}).
 * Conflict on the occupied correlation guard (unique index gen_durable_correlation) drops the
 * row, and so does an open dedup window on the key (index gen_durable_dedup, probed only for a
 * keyed row): no row returned ⇒ duplicate. Touches no other table (docs/design.md §3.7).
 */
export const INSERT_INSTANCE = sql(
  'insert_instance',
  `INSERT INTO {schema}.gen_durable
     ${INSERT_ROW_COLUMNS}
   ${insertRowSelect(0)}
   ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
   RETURNING id, queue, eligible_at <= now() AND held_at IS NULL AS due`,
  {
    params: insertRowParams,
    /** The inserted row, or null: the key was occupied (a duplicate). */
    decode: (rows: readonly InsertedInstance[]): InsertedInstance | null => rows[0] ?? null,
  },
);

/**
 * One instance, or the id of the instance that holds its correlation key (`insert` with
 * `onConflict: 'skip'` / `'return'`, docs/reliability.md "After an ambiguous answer",
 * docs/identity.md "Conflict modes"): the parameters of INSERT_INSTANCE; a row with
 * `inserted` false names the current holder, found by gen_durable_correlation (guard = `$9`)
 * or, for a key taken by a dedup window, gen_durable_dedup. NOTE: the holder is read from the
 * statement's snapshot; a holder that committed after it (the insert waited for it and then
 * skipped) is not seen, and no row comes back: the caller looks it up once more.
 */
export const INSERT_INSTANCE_OR_HOLDER = sql(
  'insert_instance_or_holder',
  `WITH ins AS (
     INSERT INTO {schema}.gen_durable
       ${INSERT_ROW_COLUMNS}
     ${insertRowSelect(0)}
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, eligible_at <= now() AND held_at IS NULL AS due
   )
   SELECT id, queue, due, true AS inserted FROM ins
   UNION ALL
   SELECT h.id, h.queue, false AS due, false AS inserted
     FROM ${keyHolderSelect(0)} h
    WHERE NOT EXISTS (SELECT 1 FROM ins)
   LIMIT 1`,
  {
    params: insertRowParams,
    /** The inserted row or the key's holder; null: a holder committed after the snapshot. */
    decode: (rows: readonly InsertedOrHolder[]): InsertedOrHolder | null => rows[0] ?? null,
  },
);

/** The entries of INSERT_INSTANCES and INSERT_UNKEYED_INSTANCES as rows `u`, from `$1`…`$24`. */
const UNNESTED_ENTRIES = `unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::smallint[],
              $7::timestamptz[], $8::float8[], $9::text[], $10::text[], $11::text[],
              $12::text[], $13::float8[], $14::bigint[], $15::int[], $16::text[],
              $17::timestamptz[], $18::float8[], $19::boolean[], $20::float8[], $21::text[],
              $22::int[], $23::text[], $24::text[])
       AS u(fsm, fsm_version, step, state, queue, priority, at, delay_ms, ckey, scope, conc,
            rate, weight, parent_id, ord, trace, deadline_at, deadline_ms, held, dedup_ms,
            fkey, fweight, seq_key, on_head_failure)`;

/**
 * The `$1`…`$24` of INSERT_INSTANCES and INSERT_UNKEYED_INSTANCES (the list is on
 * INSERT_INSTANCES): one array per column, the optional columns empty when no entry has them.
 */
function insertManyParams({ rows, parentIds }: InsertManyInput): unknown[] {
  // Preallocated and filled by index (children of a fan-out, batched inserts).
  const n = rows.length;
  const fsms = new Array<string>(n);
  const versions = new Array<number>(n);
  const steps = new Array<string>(n);
  const states = new Array<string>(n);
  const queues = new Array<string>(n);
  const priorities = new Array<number>(n);
  const ats = new Array<Date | null>(n);
  const delays = new Array<number>(n);
  const keys = new Array<string | null>(n);
  const scopes = new Array<string>(n);
  const concurrencyKeys = new Array<string | null>(n);
  const rateLimits = new Array<string | null>(n);
  const weights = new Array<number>(n);
  const parents = new Array<string | null>(n);
  const ords = new Array<number>(n);
  // Allocated only once a row carries a trace context: unnest pads a shorter array with NULLs.
  let traces: (string | null)[] | undefined;
  let deadlineAts: (Date | null)[] | undefined;
  let deadlineMs: (number | null)[] | undefined;
  let held: boolean[] | undefined;
  let dedupMs: (number | null)[] | undefined;
  let fairnessKeys: (string | null)[] | undefined;
  let fairnessWeights: (number | null)[] | undefined;
  let sequenceKeys: (string | null)[] | undefined;
  let headPolicies: (string | null)[] | undefined;
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    fsms[i] = r.fsm;
    versions[i] = r.fsmVersion;
    steps[i] = r.step;
    states[i] = r.stateText;
    queues[i] = r.queue;
    priorities[i] = r.priority;
    ats[i] = r.at;
    delays[i] = r.delayMs;
    keys[i] = r.correlationKey;
    scopes[i] = r.scope;
    concurrencyKeys[i] = r.concurrencyKey;
    rateLimits[i] = r.rateLimit;
    weights[i] = r.weight;
    parents[i] = parentIds?.[i] ?? null;
    ords[i] = i;
    const trace = r.traceContext ?? null;
    if (trace !== null) {
      traces ??= new Array<string | null>(n).fill(null);
      traces[i] = trace;
    }
    if (r.deadlineAt != null || r.deadlineInMs != null) {
      deadlineAts ??= new Array<Date | null>(n).fill(null);
      deadlineMs ??= new Array<number | null>(n).fill(null);
      deadlineAts[i] = r.deadlineAt ?? null;
      deadlineMs[i] = r.deadlineInMs ?? null;
    }
    if (r.held === true) {
      held ??= new Array<boolean>(n).fill(false);
      held[i] = true;
    }
    if (r.dedupWindowMs != null) {
      dedupMs ??= new Array<number | null>(n).fill(null);
      dedupMs[i] = r.dedupWindowMs;
    }
    if (r.fairnessKey != null) {
      fairnessKeys ??= new Array<string | null>(n).fill(null);
      fairnessWeights ??= new Array<number | null>(n).fill(null);
      fairnessKeys[i] = r.fairnessKey;
      fairnessWeights[i] = r.fairnessWeight ?? 1;
    }
    if (r.sequenceKey != null) {
      sequenceKeys ??= new Array<string | null>(n).fill(null);
      headPolicies ??= new Array<string | null>(n).fill(null);
      sequenceKeys[i] = r.sequenceKey;
      headPolicies[i] = r.onHeadFailure ?? 'block';
    }
  }
  return [
    fsms,
    versions,
    steps,
    states,
    queues,
    priorities,
    ats,
    delays,
    keys,
    scopes,
    concurrencyKeys,
    rateLimits,
    weights,
    parents,
    ords,
    traces ?? NO_TRACES,
    deadlineAts ?? NO_DEADLINES,
    deadlineMs ?? NO_DEADLINES,
    held ?? NO_DEADLINES,
    dedupMs ?? NO_DEADLINES,
    fairnessKeys ?? NO_DEADLINES,
    fairnessWeights ?? NO_DEADLINES,
    sequenceKeys ?? NO_DEADLINES,
    headPolicies ?? NO_DEADLINES,
  ];
}

/**
 * Many instances in one statement for any size (docs/design.md §2.5, §3.7): fixed parallel arrays
 * expanded by unnest, inserted ordered by correlation key (opposite orders would deadlock on
 * gen_durable_correlation); duplicates drop silently. `$14` = parent ids (children) or NULLs;
 * `$15` = per-entry ordinal, returned as `ord` so callers map each id back to its entry (the
 * group-commit insert batcher, docs/design.md §26.11): an entry whose ordinal is missing was a duplicate.
 * `$16` = per-entry W3C trace context or NULL (docs/design.md §31); empty when no entry has one.
 * `$17` / `$18` = per-entry deadline, absolute or ms from now (docs/operations-control.md
 * "Instance deadlines"); empty when no entry has one. `$19` = per-entry held (inserted held,
 * docs/operations-control.md "Hold and release"; a held row is never `due`), `$20` = per-entry
 * dedup window in ms (docs/identity.md "Dedup windows"); each empty when no entry has one. An
 * entry whose key an earlier entry of the batch (lower ordinal) takes with a window drops like a
 * duplicate: the statement's snapshot cannot see that entry's row (checked only when `$20` is
 * not empty, so a batch without windows runs the plan it ran before). `$21` / `$22` = per-entry
 * fairness key and weight (docs/many-tenants.md "Fair claims by key"); each empty when no entry
 * has a key (unnest pads NULLs: no key, weight 1); `$23`/`$24` the sequence key and its failure
 * policy (docs/sequences.md), each empty when no entry has a key; ids are drawn in entry order,
 * so a key's entries of one batch are ordered as given.
 * NOTE: RETURNING sees only the inserted row, so `e` draws each entry's id from the table's
 * identity sequence up front (materialized: it is volatile and read twice) and the insert
 * writes it explicitly; joining the returned rows to `e` on that id (PK, unique) carries the
 * ordinal through. `pg_typeof(NULL::table)::text` names the table (quoted, qualified) without
 * a string literal, so any schema name works. Served by the PK and gen_durable_correlation; a
 * keyed entry whose key has an open dedup window (docs/identity.md "Dedup windows", index
 * gen_durable_dedup) drops like a duplicate.
 */
export const INSERT_INSTANCES = sql(
  'insert_instances',
  `WITH s AS (
     SELECT pg_get_serial_sequence(pg_typeof(NULL::{schema}.gen_durable)::text, 'id')::regclass AS seq
   ), e AS MATERIALIZED (
     SELECT nextval(s.seq) AS id, u.*
       FROM s, ${UNNESTED_ENTRIES}
   ), ins AS (
     INSERT INTO {schema}.gen_durable
       (id, fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_key,
        correlation_scope, concurrency_key, rate_limit, weight, parent_id, trace_context, deadline_at,
        held_at, dedup_until, fairness_key, fairness_weight, sequence_key, on_head_failure)
     SELECT e.id, e.fsm, e.fsm_version, e.step, e.state::jsonb, e.queue, e.priority,
            COALESCE(e.at, now() + make_interval(secs => e.delay_ms / 1000)), e.ckey,
            string_to_array(e.scope, ',')::{schema}.gen_durable_status[], e.conc, e.rate, e.weight, e.parent_id,
            e.trace, COALESCE(e.deadline_at, now() + make_interval(secs => e.deadline_ms / 1000)),
            CASE WHEN e.held THEN now() END, now() + make_interval(secs => e.dedup_ms / 1000),
            e.fkey, COALESCE(e.fweight, 1), e.seq_key, e.on_head_failure
       FROM e
      WHERE e.ckey IS NULL OR (NOT EXISTS (
              SELECT 1 FROM {schema}.gen_durable d WHERE d.correlation_key = e.ckey AND d.dedup_until > now())
            AND (cardinality($20::float8[]) = 0 OR NOT EXISTS (
              SELECT 1 FROM e w WHERE w.ckey = e.ckey AND w.dedup_ms IS NOT NULL AND w.ord < e.ord)))
      ORDER BY e.ckey, e.ord
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, correlation_key, parent_id, eligible_at <= now() AND held_at IS NULL AS due
   )
   SELECT ins.id, ins.queue, ins.correlation_key, ins.parent_id, ins.due, e.ord
     FROM ins JOIN e ON e.id = ins.id
    ORDER BY ins.id`,
  {
    params: insertManyParams,
    decode: (rows: readonly InsertedRecord[]): InsertedEntry[] => {
      const out: InsertedEntry[] = [];
      for (const r of rows) {
        out.push({
          id: r.id,
          queue: r.queue,
          correlationKey: r.correlation_key,
          parentId: r.parent_id,
          due: r.due,
          ord: Number(r.ord),
        });
      }
      return out;
    },
  },
);

interface InsertedUnkeyedRecord {
  id: string;
  queue: string;
  parent_id: string | null;
  due: boolean;
}

/** Whether `a` < `b` as bigints written in decimal (ids: positive, no leading zeros). */
function idBefore(a: string, b: string): boolean {
  return a.length < b.length || (a.length === b.length && a < b);
}

/**
 * INSERT_INSTANCES for a batch in which no entry has a correlation key, the common case (the
 * group-commit lane's callers, `insertAll`, a step's children): with no key nothing can
 * conflict or fall inside a dedup window, so every entry is inserted and the statement is a
 * plain `INSERT … SELECT` from the same `$1`…`$24` (no arbiter, no dedup probe, no drawn-ids
 * CTE and join back; 28 % less server time for 50 rows, docs/performance.md "Group-commit
 * inserts"). The ordinals come from the ids: the identity default draws one per row as the
 * insert takes the unnested rows, in entry order, and a sequence only ascends, so the k-th
 * smallest returned id is entry k's. A count other than the entries' is an engine bug, thrown.
 * Served by the PK (and the partial indexes a new runnable row enters, gen_durable_pick).
 */
export const INSERT_UNKEYED_INSTANCES = sql(
  'insert_unkeyed_instances',
  `INSERT INTO {schema}.gen_durable
     (fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_scope,
      concurrency_key, rate_limit, weight, parent_id, trace_context, deadline_at, held_at,
      dedup_until, fairness_key, fairness_weight, sequence_key, on_head_failure)
   SELECT u.fsm, u.fsm_version, u.step, u.state::jsonb, u.queue, u.priority,
          COALESCE(u.at, now() + make_interval(secs => u.delay_ms / 1000)),
          string_to_array(u.scope, ',')::{schema}.gen_durable_status[], u.conc, u.rate, u.weight,
          u.parent_id, u.trace,
          COALESCE(u.deadline_at, now() + make_interval(secs => u.deadline_ms / 1000)),
          CASE WHEN u.held THEN now() END, now() + make_interval(secs => u.dedup_ms / 1000),
          u.fkey, COALESCE(u.fweight, 1), u.seq_key, u.on_head_failure
     FROM ${UNNESTED_ENTRIES}
   RETURNING id, queue, parent_id, eligible_at <= now() AND held_at IS NULL AS due`,
  {
    params: insertManyParams,
    decode: (rows: readonly InsertedUnkeyedRecord[], input: InsertManyInput): InsertedEntry[] => {
      if (rows.length !== input.rows.length) {
        throw new Error(
          `gen-durable bug: an unkeyed insert of ${input.rows.length} row(s) returned ${rows.length}`,
        );
      }
      let ordered = rows;
      for (let i = 1; i < rows.length; i++) {
        if (idBefore(rows[i]!.id, rows[i - 1]!.id)) {
          ordered = [...rows].sort((a, b) => (idBefore(a.id, b.id) ? -1 : 1));
          break;
        }
      }
      const out = new Array<InsertedEntry>(ordered.length);
      for (let i = 0; i < ordered.length; i++) {
        const r = ordered[i]!;
        out[i] = {
          id: r.id,
          queue: r.queue,
          correlationKey: null,
          parentId: r.parent_id,
          due: r.due,
          ord: i,
        };
      }
      return out;
    },
  },
);

/**
 * Inserts a batch by the cheaper statement it allows: INSERT_UNKEYED_INSTANCES when no entry
 * has a correlation key, else INSERT_INSTANCES. The answer is the same: the rows written, each
 * with its entry's ordinal.
 */
export function insertInstances(
  runner: StatementRunner,
  input: InsertManyInput,
  on?: PoolClient,
): Promise<InsertedEntry[]> {
  const keyed = input.rows.some((row) => row.correlationKey != null);
  return (keyed ? INSERT_INSTANCES : INSERT_UNKEYED_INSTANCES).run(runner, input, on);
}
