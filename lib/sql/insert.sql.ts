import type { InsertRow } from '../instance/insert-row';
import { sql } from './statement';

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

/** The `$1`…`$14` of INSERT_INSTANCE and INSERT_INSTANCE_OR_HOLDER, in column order. */
function insertRowParams(row: InsertRow): unknown[] {
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
  ];
}

/**
 * One instance. `$4` state is JSON text cast server-side; `$7` an absolute start time or
 * NULL, else now() + `$8` ms (DB clock); `$10` the correlation scope comma-joined.
 * `$14` the W3C trace context of the inserting code or NULL (docs/design.md §31).
 * Conflict on the occupied correlation guard (unique index gen_durable_correlation) drops the
 * row: no row returned ⇒ duplicate. Touches no other table (docs/design.md §3.7).
 */
export const INSERT_INSTANCE = sql(
  'insert_instance',
  `INSERT INTO {schema}.gen_durable
     (fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_key,
      correlation_scope, concurrency_key, rate_limit, weight, trace_context)
   VALUES ($1, $2, $3, $4::text::jsonb, $5, $6,
           COALESCE($7::timestamptz, now() + make_interval(secs => $8::float8 / 1000)),
           $9, string_to_array($10::text, ',')::{schema}.gen_durable_status[], $11, $12, $13, $14)
   ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
   RETURNING id, queue, eligible_at <= now() AS due`,
  {
    params: insertRowParams,
    /** The inserted row, or null: the key was occupied (a duplicate). */
    decode: (rows: readonly InsertedInstance[]): InsertedInstance | null => rows[0] ?? null,
  },
);

/**
 * One instance, or the id of the instance that holds its correlation key (`insert` with
 * `onConflict: 'return'`, docs/reliability.md "After an ambiguous answer"): the parameters of
 * INSERT_INSTANCE; a row with `inserted` false names the current holder, found by
 * gen_durable_correlation (guard = `$9`). NOTE: the holder is read from the statement's
 * snapshot; a holder that committed after it (the insert waited for it and then skipped)
 * is not seen, and no row comes back: the caller looks it up once more.
 */
export const INSERT_INSTANCE_OR_HOLDER = sql(
  'insert_instance_or_holder',
  `WITH ins AS (
     INSERT INTO {schema}.gen_durable
       (fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_key,
        correlation_scope, concurrency_key, rate_limit, weight, trace_context)
     VALUES ($1, $2, $3, $4::text::jsonb, $5, $6,
             COALESCE($7::timestamptz, now() + make_interval(secs => $8::float8 / 1000)),
             $9, string_to_array($10::text, ',')::{schema}.gen_durable_status[], $11, $12, $13, $14)
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, eligible_at <= now() AS due
   )
   SELECT id, queue, due, true AS inserted FROM ins
   UNION ALL
   SELECT g.id, g.queue, false AS due, false AS inserted
     FROM {schema}.gen_durable g
    WHERE NOT EXISTS (SELECT 1 FROM ins) AND g.correlation_guard = $9::text
   LIMIT 1`,
  {
    params: insertRowParams,
    /** The inserted row or the key's holder; null: a holder committed after the snapshot. */
    decode: (rows: readonly InsertedOrHolder[]): InsertedOrHolder | null => rows[0] ?? null,
  },
);

/**
 * Many instances in one statement for any size (docs/design.md §2.5, §3.7): fixed parallel arrays
 * expanded by unnest, inserted ordered by correlation key (opposite orders would deadlock on
 * gen_durable_correlation); duplicates drop silently. `$14` = parent ids (children) or NULLs;
 * `$15` = per-entry ordinal, returned as `ord` so callers map each id back to its entry (the
 * group-commit insert batcher, docs/design.md §26.11): an entry whose ordinal is missing was a duplicate.
 * `$16` = per-entry W3C trace context or NULL (docs/design.md §31); empty when no entry has one.
 * NOTE: RETURNING sees only the inserted row, so `e` draws each entry's id from the table's
 * identity sequence up front (materialized: it is volatile and read twice) and the insert
 * writes it explicitly; joining the returned rows to `e` on that id (PK, unique) carries the
 * ordinal through. `pg_typeof(NULL::table)::text` names the table (quoted, qualified) without
 * a string literal, so any schema name works. Served by the PK and gen_durable_correlation.
 */
export const INSERT_INSTANCES = sql(
  'insert_instances',
  `WITH s AS (
     SELECT pg_get_serial_sequence(pg_typeof(NULL::{schema}.gen_durable)::text, 'id')::regclass AS seq
   ), e AS MATERIALIZED (
     SELECT nextval(s.seq) AS id, u.*
       FROM s, unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::smallint[],
                      $7::timestamptz[], $8::float8[], $9::text[], $10::text[], $11::text[],
                      $12::text[], $13::float8[], $14::bigint[], $15::int[], $16::text[])
         AS u(fsm, fsm_version, step, state, queue, priority, at, delay_ms, ckey, scope, conc,
              rate, weight, parent_id, ord, trace)
   ), ins AS (
     INSERT INTO {schema}.gen_durable
       (id, fsm, fsm_version, step, state, queue, priority, eligible_at, correlation_key,
        correlation_scope, concurrency_key, rate_limit, weight, parent_id, trace_context)
     SELECT e.id, e.fsm, e.fsm_version, e.step, e.state::jsonb, e.queue, e.priority,
            COALESCE(e.at, now() + make_interval(secs => e.delay_ms / 1000)), e.ckey,
            string_to_array(e.scope, ',')::{schema}.gen_durable_status[], e.conc, e.rate, e.weight, e.parent_id,
            e.trace
       FROM e
      ORDER BY e.ckey, e.ord
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, correlation_key, parent_id, eligible_at <= now() AS due
   )
   SELECT ins.id, ins.queue, ins.correlation_key, ins.parent_id, ins.due, e.ord
     FROM ins JOIN e ON e.id = ins.id
    ORDER BY ins.id`,
  {
    params: ({ rows, parentIds }: InsertManyInput) => {
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
      ];
    },
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
