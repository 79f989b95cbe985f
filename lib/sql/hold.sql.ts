import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/**
 * The target of HOLD_INSTANCE / RELEASE_INSTANCE: an id, or (null id) a correlation key, and
 * what their history row records (docs/design.md §28.1).
 */
export interface HoldInput {
  readonly id: string | null;
  readonly correlationKey: string | null;
  /** The reason: HOLD stores it on the row; both record it in their history row. Or null. */
  readonly reason?: string | null;
  /** Who asked: the history row's `actor`, or null. */
  readonly actor?: string | null;
  /** FSM names whose history is `'off'` (no row) and `'full'` (a row with the state). */
  readonly historyOff?: readonly string[];
  readonly historyFull?: readonly string[];
}

/** What HOLD_INSTANCE / RELEASE_INSTANCE answered for the target they found. */
export interface HoldAnswer {
  readonly id: string;
  readonly fsm: string;
  /** The status in the statement's snapshot (the hold is written only on a live row). */
  readonly status: DurableStatus;
  readonly queue: string;
  /** The row was written: held (HOLD: it is live) or released (RELEASE: it was held). */
  readonly changed: boolean;
  /** It was held in the statement's snapshot. */
  readonly wasHeld: boolean;
  /** RELEASE: the released row is runnable and due (poke its queue). */
  readonly due: boolean;
}

interface HoldRecord {
  id: string;
  fsm: string;
  status: DurableStatus;
  queue: string;
  changed: boolean;
  held: boolean;
  due: boolean;
}

/** The target row: by primary key (`$1`), else the key's occupant (gen_durable_correlation, `$2`). */
const TARGET = `SELECT t.id, t.fsm, t.status, t.queue, t.held FROM (
       SELECT g.id, g.fsm, g.status, g.queue, g.held_at IS NOT NULL AS held FROM {schema}.gen_durable g WHERE g.id = $1::bigint
       UNION ALL
       SELECT g.id, g.fsm, g.status, g.queue, g.held_at IS NOT NULL FROM {schema}.gen_durable g
        WHERE $1::bigint IS NULL AND g.correlation_guard = $2::text
       LIMIT 1) t`;

const decode = (rows: readonly HoldRecord[]): HoldAnswer | null => {
  const r = rows[0];
  return r
    ? {
        id: r.id,
        fsm: r.fsm,
        status: r.status,
        queue: r.queue,
        changed: r.changed,
        wasHeld: r.held,
        due: r.due,
      }
    : null;
};

/**
 * The history row of a hold or release (docs/design.md §28.1), over the CTE `u` that returns
 * the written row (`id`, `fsm`, `step`, `attempt`, `state`): kind `kind`, outcome `outcome`,
 * the reason `$3` as `error` `{ name: 'reason', message, stack: null }` (as a `stop(reason)`
 * records its reason), actor `$6`; with the state when its FSM is in `$5` (`'full'`), none when
 * in `$4` (`'off'`). `when` further limits which written rows record. Index
 * gen_durable_history_instance.
 */
function recordHold(kind: string, outcome: string, when = 'true'): string {
  return `INSERT INTO {schema}.gen_durable_history (instance_id, kind, step, attempt, outcome, error, state, actor)
     SELECT u.id, '${kind}', u.step, u.attempt, '${outcome}',
            CASE WHEN $3::text IS NOT NULL
                 THEN jsonb_build_object('name', 'reason', 'message', $3::text, 'stack', NULL) END,
            CASE WHEN u.fsm = ANY ($5::text[]) THEN u.state END, $6::text
       FROM u
      WHERE NOT (u.fsm = ANY ($4::text[])) AND ${when}`;
}

/** `$1`…`$6` of HOLD_INSTANCE and RELEASE_INSTANCE (see {@link recordHold}). */
function historyParams(i: HoldInput): unknown[] {
  return [
    i.id,
    i.correlationKey,
    i.reason ?? null,
    i.historyOff ?? [],
    i.historyFull ?? [],
    i.actor ?? null,
  ];
}

/**
 * Holds one live instance (docs/operations-control.md "Hold and release"), one statement:
 * `held_at` set (kept from an earlier hold), `held_reason` `$3` (an earlier reason kept when
 * `$3` is NULL). Its WHERE re-checks the live status on the locked version, so a row that ended
 * meanwhile is not held (`changed` false). The claim skips a held row (CLAIM_RUNNABLE); an
 * executing row finishes its step and is not claimed again. A hold that held the row, or
 * gave a reason, records a `manual.hold` history row ({@link recordHold}). By primary key, or
 * the key's occupant by gen_durable_correlation. No row: no target.
 */
export const HOLD_INSTANCE = sql(
  'hold_instance',
  `WITH t AS (${TARGET}), u AS (
     UPDATE {schema}.gen_durable g
        SET held_at = COALESCE(g.held_at, now()), held_reason = COALESCE($3::text, g.held_reason),
            updated_at = now()
       FROM t
      WHERE g.id = t.id AND g.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
     RETURNING g.id, g.fsm, g.step, g.attempt, g.state
   ), recorded AS (
     ${recordHold('manual.hold', 'held', '(NOT (SELECT t.held FROM t) OR $3::text IS NOT NULL)')}
   )
   SELECT t.id::text, t.fsm, t.status, t.queue, t.held, EXISTS (SELECT 1 FROM u) AS changed, false AS due
     FROM t`,
  {
    params: (i: HoldInput) => historyParams(i),
    decode,
  },
);

/**
 * Releases one held instance (docs/operations-control.md "Hold and release"), one statement:
 * `held_at` and `held_reason` cleared; `due` when it is runnable and due, so the caller pokes
 * its queue; a `manual.release` history row ({@link recordHold}; `$3` the release's reason, not
 * stored on the row). A row not held answers `changed` false and records nothing. By primary key, or the key's occupant by
 * gen_durable_correlation. A signal delivered while it was held is in its inbox: the claim
 * that takes it presents it. No row: no target.
 */
export const RELEASE_INSTANCE = sql(
  'release_instance',
  `WITH t AS (${TARGET}), u AS (
     UPDATE {schema}.gen_durable g
        SET held_at = NULL, held_reason = NULL, updated_at = now()
       FROM t
      WHERE g.id = t.id AND g.held_at IS NOT NULL
     RETURNING g.id, g.fsm, g.step, g.attempt, g.state,
               g.status = 'runnable' AND g.eligible_at <= now() AS due
   ), recorded AS (
     ${recordHold('manual.release', 'released')}
   )
   SELECT t.id::text, t.fsm, t.status, t.queue, t.held, EXISTS (SELECT 1 FROM u) AS changed,
          COALESCE((SELECT u.due FROM u), false) AS due
     FROM t`,
  {
    params: (i: HoldInput) => historyParams(i),
    decode,
  },
);
