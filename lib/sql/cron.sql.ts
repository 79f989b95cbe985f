import type { MissedPolicy, OverlapPolicy, ScheduleView } from '../cron/schedule-spec';
import { affectedRows } from './row-decoders';
import { noParams, sql } from './statement';

/**
 * The statements of `gen_durable_schedules` (docs/design.md §29): boot upsert and prune, the
 * ticker's read, the fire, the run-time API and the health lag. The table is small (one row per
 * schedule); the ticker's read is the only one run periodically.
 */

/** A schedule as the upserts write it (`next_fire_at` computed by the caller on the DB clock). */
export interface ScheduleRow {
  readonly name: string;
  readonly fsm: string;
  readonly cron: string;
  readonly tz: string;
  readonly nextFireAt: Date;
  readonly missed: MissedPolicy;
  readonly overlap: OverlapPolicy;
  readonly stateText: string;
  /** `{ maxCatchup, queue, priority, stateFromFunction }` as JSON text. */
  readonly optionsText: string;
  readonly hash: string;
}

/** A schedule row's values in the column order of the upserts (name … definition_hash). */
function scheduleValues(r: ScheduleRow): unknown[] {
  return [
    r.name,
    r.fsm,
    r.cron,
    r.tz,
    r.nextFireAt,
    r.missed,
    r.overlap,
    r.stateText,
    r.optionsText,
    r.hash,
  ];
}

/** The options column, decoded. */
export interface ScheduleOptionsColumn {
  readonly maxCatchup: number;
  readonly queue: string | null;
  readonly priority: number;
  readonly stateFromFunction: boolean;
}

/** A schedule the ticker read, due or next. */
export interface DueSchedule {
  readonly name: string;
  readonly fsm: string;
  readonly cron: string;
  readonly tz: string;
  readonly nextFireAt: Date;
  /** `next_fire_at` exactly as stored (microseconds kept): the fire's compare-and-set value. */
  readonly nextFireText: string;
  readonly missed: MissedPolicy;
  readonly overlap: OverlapPolicy;
  readonly state: Record<string, unknown>;
  readonly options: ScheduleOptionsColumn;
  readonly hash: string;
}

/** What the ticker's read answers: the clock it fires on and the earliest schedules. */
export interface DueRead {
  readonly now: Date;
  readonly schedules: readonly DueSchedule[];
}

/** One fire: the compare-and-set and the instances to insert from its result. */
export interface FireInput {
  readonly name: string;
  /**
   * The `next_fire_at` the ticker read, as its exact text: the compare-and-set's expected value
   * (a `Date` keeps milliseconds only, and a hand-written value may carry microseconds).
   */
  readonly expected: string;
  readonly hash: string;
  /** The new `next_fire_at`; null: the expression has no later occurrence (the schedule is paused). */
  readonly next: Date | null;
  /** The latest occurrence fired, or null (nothing fired: last_fire_at kept). */
  readonly last: Date | null;
  readonly fsm: string;
  readonly fsmVersion: number;
  readonly step: string;
  readonly queue: string;
  readonly priority: number;
  /** Comma-joined correlation scope of the fired instances. */
  readonly scope: string;
  /** Per fired instance: its correlation key and its state (JSON object text). */
  readonly keys: readonly string[];
  readonly states: readonly string[];
}

/** The fire's answer: whether this call advanced the schedule, and the ids it inserted. */
export interface FireResult {
  readonly advanced: boolean;
  readonly ids: readonly string[];
}

/** The oldest overdue un-paused schedule (SCHEDULE_LAG), or none. */
export interface ScheduleLag {
  readonly name: string | null;
  readonly lagMs: number;
  readonly overdue: number;
}

interface ScheduleRecord {
  name: string;
  fsm: string;
  cron: string;
  tz: string;
  next_fire_at: Date;
  last_fire_at: Date | null;
  paused: boolean;
  missed: MissedPolicy;
  overlap: OverlapPolicy;
  state: Record<string, unknown>;
  options: Partial<ScheduleOptionsColumn>;
  definition_hash: string;
  declared: boolean;
  updated_at: Date;
}

const COLUMNS = `name, fsm, cron, tz, next_fire_at, last_fire_at, paused, missed, overlap, state,
       options, definition_hash, declared, updated_at`;

function optionsOf(raw: Partial<ScheduleOptionsColumn> | null | undefined): ScheduleOptionsColumn {
  return {
    maxCatchup: typeof raw?.maxCatchup === 'number' ? raw.maxCatchup : 10,
    queue: typeof raw?.queue === 'string' ? raw.queue : null,
    priority: typeof raw?.priority === 'number' ? raw.priority : 0,
    stateFromFunction: raw?.stateFromFunction === true,
  };
}

function viewOf(r: ScheduleRecord): ScheduleView {
  const o = optionsOf(r.options);
  return {
    name: r.name,
    fsm: r.fsm,
    cron: r.cron,
    tz: r.tz,
    nextFireAt: r.next_fire_at,
    lastFireAt: r.last_fire_at,
    paused: r.paused,
    missed: r.missed,
    overlap: r.overlap,
    maxCatchup: o.maxCatchup,
    queue: o.queue,
    priority: o.priority,
    state: r.state,
    declared: r.declared,
    updatedAt: r.updated_at,
  };
}

function viewsOf(rows: readonly ScheduleRecord[]): ScheduleView[] {
  const out = new Array<ScheduleView>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = viewOf(rows[i]!);
  return out;
}

/** The database clock: the instant boot and run-time upserts compute the next fire from. */
export const SCHEDULE_CLOCK = sql('schedule_clock', `SELECT now() AS now`, {
  params: noParams,
  decode: (rows: readonly { now: Date }[]): Date => rows[0]?.now ?? new Date(),
});

/**
 * Boot upsert of this node's `@DurableCron` schedules, in name order (two nodes booting at once
 * lock the rows in one order: no deadlock). A row is rewritten only when its definition hash
 * changed or it was a run-time schedule (then `next_fire_at` is the caller's recomputation);
 * an unchanged one keeps its `next_fire_at`, so a restart after downtime still sees what it
 * missed, and keeps `paused`. Returns the names written. Conflict target: the PK.
 */
export const UPSERT_DECLARED_SCHEDULES = sql(
  'upsert_declared_schedules',
  `INSERT INTO {schema}.gen_durable_schedules AS s
     (name, fsm, cron, tz, next_fire_at, missed, overlap, state, options, definition_hash, declared)
   SELECT u.name, u.fsm, u.cron, u.tz, u.next_fire_at, u.missed, u.overlap, u.state::jsonb,
          u.options::jsonb, u.hash, true
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[],
                 $7::text[], $8::text[], $9::text[], $10::text[])
       AS u(name, fsm, cron, tz, next_fire_at, missed, overlap, state, options, hash)
    ORDER BY u.name
   ON CONFLICT (name) DO UPDATE
      SET fsm = EXCLUDED.fsm, cron = EXCLUDED.cron, tz = EXCLUDED.tz,
          next_fire_at = EXCLUDED.next_fire_at, missed = EXCLUDED.missed,
          overlap = EXCLUDED.overlap, state = EXCLUDED.state, options = EXCLUDED.options,
          definition_hash = EXCLUDED.definition_hash, declared = true, updated_at = now()
    WHERE s.definition_hash <> EXCLUDED.definition_hash OR NOT s.declared
   RETURNING name`,
  {
    params: (i: { readonly rows: readonly ScheduleRow[] }) => {
      const cols: unknown[][] = [[], [], [], [], [], [], [], [], [], []];
      for (const r of i.rows) {
        const values = scheduleValues(r);
        for (let c = 0; c < values.length; c++) cols[c]!.push(values[c]);
      }
      return cols;
    },
    decode: (rows: readonly { name: string }[]): string[] => rows.map((r) => r.name),
  },
);

/**
 * `schedules: { prune: true }`: deletes the declared schedules of FSMs `$1` (this node's) whose
 * name is not in `$2` (what this node declares). Run-time schedules and schedules of FSMs this
 * node lacks are never pruned. A scan of the (small) table.
 */
export const PRUNE_DECLARED_SCHEDULES = sql(
  'prune_declared_schedules',
  `DELETE FROM {schema}.gen_durable_schedules
    WHERE declared AND fsm = ANY ($1::text[]) AND NOT (name = ANY ($2::text[]))
   RETURNING name`,
  {
    params: (i: { readonly fsms: readonly string[]; readonly keep: readonly string[] }) => [
      i.fsms,
      i.keep,
    ],
    decode: (rows: readonly { name: string }[]): string[] => rows.map((r) => r.name),
  },
);

/**
 * A run-time schedule (`engine.schedules.upsert`): inserted, or updated unless it is a declared
 * one (then no row comes back). `next_fire_at` is replaced only when the definition hash
 * changed. Conflict target: the PK.
 */
export const UPSERT_SCHEDULE = sql(
  'upsert_schedule',
  `INSERT INTO {schema}.gen_durable_schedules AS s
     (name, fsm, cron, tz, next_fire_at, missed, overlap, state, options, definition_hash, declared)
   VALUES ($1, $2, $3, $4, $5::timestamptz, $6, $7, $8::text::jsonb, $9::text::jsonb, $10, false)
   ON CONFLICT (name) DO UPDATE
      SET fsm = EXCLUDED.fsm, cron = EXCLUDED.cron, tz = EXCLUDED.tz,
          next_fire_at = CASE WHEN s.definition_hash = EXCLUDED.definition_hash
                              THEN s.next_fire_at ELSE EXCLUDED.next_fire_at END,
          missed = EXCLUDED.missed, overlap = EXCLUDED.overlap, state = EXCLUDED.state,
          options = EXCLUDED.options, definition_hash = EXCLUDED.definition_hash,
          updated_at = now()
    WHERE NOT s.declared
   RETURNING ${COLUMNS}`,
  {
    params: scheduleValues,
    decode: (rows: readonly ScheduleRecord[]): ScheduleView | null =>
      rows[0] ? viewOf(rows[0]) : null,
  },
);

/**
 * The ticker's read (docs/design.md §29): the clock it fires on (`$1`, or the database's now())
 * and the `$3` un-paused schedules of FSMs `$2` (this node's) with the earliest
 * `next_fire_at`: the due ones and the next to wake for. An index-ordered scan of
 * gen_durable_schedules_due that stops at `$3`; one row with a NULL name when there is none.
 */
export const DUE_SCHEDULES = sql(
  'due_schedules',
  `SELECT n.now, s.name, s.fsm, s.cron, s.tz, s.next_fire_at, s.next_fire_at::text AS next_fire_text,
          s.missed, s.overlap, s.state, s.options, s.definition_hash
     FROM (SELECT COALESCE($1::timestamptz, now()) AS now) n
     LEFT JOIN LATERAL (
       SELECT * FROM {schema}.gen_durable_schedules
        WHERE NOT paused AND fsm = ANY ($2::text[])
        ORDER BY next_fire_at
        LIMIT $3) s ON true`,
  {
    params: (i: {
      readonly at: Date | null;
      readonly fsms: readonly string[];
      readonly limit: number;
    }) => [i.at, i.fsms, i.limit],
    decode: (
      rows: readonly (Omit<ScheduleRecord, 'name'> & {
        name: string | null;
        now: Date;
        next_fire_text: string;
      })[],
    ): DueRead => {
      const schedules: DueSchedule[] = [];
      for (const r of rows) {
        if (r.name === null) continue;
        schedules.push({
          name: r.name,
          fsm: r.fsm,
          cron: r.cron,
          tz: r.tz,
          nextFireAt: r.next_fire_at,
          nextFireText: r.next_fire_text,
          missed: r.missed,
          overlap: r.overlap,
          state: r.state,
          options: optionsOf(r.options),
          hash: r.definition_hash,
        });
      }
      return { now: rows[0]?.now ?? new Date(), schedules };
    },
  },
);

/**
 * One fire, exactly once with no leader (docs/design.md §29): `adv` advances `next_fire_at`
 * by compare-and-set on the value the ticker read (`$2`) and the definition hash (`$3`), by
 * the PK; `ins` inserts the fired instances only from `adv`'s result, so a second node running
 * the same fire at once waits for the row lock, re-reads the row, matches nothing and inserts
 * nothing. Each instance carries correlation key `$12[i]` (`cron:<name>:<instant ISO>` with
 * the terminal-inclusive scope `$11`, or `cron:<name>` with the live scope for
 * `overlap: 'skip'`): the unique index gen_durable_correlation drops a second fire of the same
 * occurrence (two definitions during a rolling deploy) or an overlapping one. Inserted in key
 * order. `advanced` = 0 ⇒ another node fired it; fewer ids than keys ⇒ skipped duplicates.
 */
export const FIRE_SCHEDULE = sql(
  'fire_schedule',
  `WITH adv AS (
     UPDATE {schema}.gen_durable_schedules
        SET next_fire_at = COALESCE($4::timestamptz, next_fire_at),
            paused = paused OR $4::timestamptz IS NULL,
            last_fire_at = COALESCE($5::timestamptz, last_fire_at),
            updated_at = now()
      WHERE name = $1 AND next_fire_at = $2::timestamptz AND definition_hash = $3 AND NOT paused
     RETURNING name
   ), ins AS (
     INSERT INTO {schema}.gen_durable
       (fsm, fsm_version, step, state, queue, priority, correlation_key, correlation_scope)
     SELECT $6, $7, $8, f.state::jsonb, $9, $10, f.ckey,
            string_to_array($11::text, ',')::{schema}.gen_durable_status[]
       FROM adv, unnest($12::text[], $13::text[]) AS f(ckey, state)
      ORDER BY f.ckey
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id
   )
   SELECT (SELECT count(*)::int FROM adv) AS advanced,
          COALESCE((SELECT array_agg(id ORDER BY id) FROM ins), '{}'::bigint[]) AS ids`,
  {
    params: (i: FireInput) => [
      i.name,
      i.expected,
      i.hash,
      i.next,
      i.last,
      i.fsm,
      i.fsmVersion,
      i.step,
      i.queue,
      i.priority,
      i.scope,
      i.keys,
      i.states,
    ],
    decode: (rows: readonly { advanced: number; ids: string[] }[]): FireResult => ({
      advanced: (rows[0]?.advanced ?? 0) > 0,
      ids: rows[0]?.ids ?? [],
    }),
  },
);

/** One schedule by name (PK), or null. */
export const GET_SCHEDULE = sql(
  'get_schedule',
  `SELECT ${COLUMNS} FROM {schema}.gen_durable_schedules WHERE name = $1`,
  {
    params: (i: { readonly name: string }) => [i.name],
    decode: (rows: readonly ScheduleRecord[]): ScheduleView | null =>
      rows[0] ? viewOf(rows[0]) : null,
  },
);

/** Every schedule, by name (PK order). */
export const LIST_SCHEDULES = sql(
  'list_schedules',
  `SELECT ${COLUMNS} FROM {schema}.gen_durable_schedules ORDER BY name`,
  { params: noParams, decode: viewsOf },
);

/** Deletes a schedule by name (PK); its fired instances are untouched. Affected rows. */
export const DELETE_SCHEDULE = sql(
  'delete_schedule',
  `DELETE FROM {schema}.gen_durable_schedules WHERE name = $1`,
  { params: (i: { readonly name: string }) => [i.name], decode: affectedRows },
);

/**
 * Pauses (`$2` true) or resumes (`$2` false) a schedule by name (PK). A resume sets
 * `next_fire_at` to `$3`, the next occurrence after now: what fell due while paused is not
 * caught up. The schedule after the change, or null (no such name).
 */
export const SET_SCHEDULE_PAUSED = sql(
  'set_schedule_paused',
  `UPDATE {schema}.gen_durable_schedules
      SET paused = $2, next_fire_at = COALESCE($3::timestamptz, next_fire_at), updated_at = now()
    WHERE name = $1
   RETURNING ${COLUMNS}`,
  {
    params: (i: {
      readonly name: string;
      readonly paused: boolean;
      readonly next: Date | null;
    }) => [i.name, i.paused, i.next],
    decode: (rows: readonly ScheduleRecord[]): ScheduleView | null =>
      rows[0] ? viewOf(rows[0]) : null,
  },
);

/**
 * Health `scheduleLag` (docs/design.md §29): the un-paused schedule whose `next_fire_at` is the
 * oldest in the past, how late it is (ms, 0 when none is due), and how many are overdue by more
 * than `$1` ms (capped at `$2`). Index-ordered scans of gen_durable_schedules_due.
 */
export const SCHEDULE_LAG = sql(
  'schedule_lag',
  `SELECT h.name,
          GREATEST(0, COALESCE(extract(epoch FROM now() - h.next_fire_at) * 1000, 0))::float8 AS lag_ms,
          (SELECT count(*)::int FROM (
             SELECT 1 FROM {schema}.gen_durable_schedules
              WHERE NOT paused AND next_fire_at < now() - make_interval(secs => $1::float8 / 1000)
              LIMIT $2) o) AS overdue
     FROM (SELECT 1) one
     LEFT JOIN LATERAL (
       SELECT name, next_fire_at FROM {schema}.gen_durable_schedules
        WHERE NOT paused ORDER BY next_fire_at LIMIT 1) h ON true`,
  {
    params: (i: { readonly maxLagMs: number; readonly cap: number }) => [i.maxLagMs, i.cap],
    decode: (
      rows: readonly { name: string | null; lag_ms: number; overdue: number }[],
    ): ScheduleLag => ({
      name: rows[0]?.name ?? null,
      lagMs: rows[0]?.lag_ms ?? 0,
      overdue: rows[0]?.overdue ?? 0,
    }),
  },
);
