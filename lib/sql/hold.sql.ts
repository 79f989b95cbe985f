import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** The target of HOLD_INSTANCE / RELEASE_INSTANCE: an id, or (null id) a correlation key. */
export interface HoldInput {
  readonly id: string | null;
  readonly correlationKey: string | null;
  /** HOLD_INSTANCE only: the reason stored, or null. */
  readonly reason?: string | null;
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
 * Holds one live instance (docs/operations-control.md "Hold and release"), one statement:
 * `held_at` set (kept from an earlier hold), `held_reason` `$3` (an earlier reason kept when
 * `$3` is NULL). Its WHERE re-checks the live status on the locked version, so a row that ended
 * meanwhile is not held (`changed` false). The claim skips a held row (CLAIM_RUNNABLE); an
 * executing row finishes its step and is not claimed again. By primary key, or the key's
 * occupant by gen_durable_correlation. No row: no target.
 */
export const HOLD_INSTANCE = sql(
  'hold_instance',
  `WITH t AS (${TARGET}), u AS (
     UPDATE {schema}.gen_durable g
        SET held_at = COALESCE(g.held_at, now()), held_reason = COALESCE($3::text, g.held_reason),
            updated_at = now()
       FROM t
      WHERE g.id = t.id AND g.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
     RETURNING g.id
   )
   SELECT t.id::text, t.fsm, t.status, t.queue, t.held, EXISTS (SELECT 1 FROM u) AS changed, false AS due
     FROM t`,
  {
    params: (i: HoldInput) => [i.id, i.correlationKey, i.reason ?? null],
    decode,
  },
);

/**
 * Releases one held instance (docs/operations-control.md "Hold and release"), one statement:
 * `held_at` and `held_reason` cleared; `due` when it is runnable and due, so the caller pokes
 * its queue. A row not held answers `changed` false. By primary key, or the key's occupant by
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
     RETURNING g.id, g.status = 'runnable' AND g.eligible_at <= now() AS due
   )
   SELECT t.id::text, t.fsm, t.status, t.queue, t.held, EXISTS (SELECT 1 FROM u) AS changed,
          COALESCE((SELECT u.due FROM u), false) AS due
     FROM t`,
  {
    params: (i: HoldInput) => [i.id, i.correlationKey],
    decode,
  },
);
