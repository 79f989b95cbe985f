import type { InsertRow } from '../instance/insert-row';
import {
  INSERT_ROW_COLUMNS,
  type InsertedInstance,
  insertRowParams,
  insertRowSelect,
  keyHolderSelect,
} from './insert.sql';
import { sql } from './statement';

/** What INSERT_OR_DEBOUNCE is asked: the row, its debounce and its bound from the first insert. */
export interface DebounceInput {
  readonly row: InsertRow;
  readonly debounceMs: number;
  /** The latest start, counted from the occupant's insert; null = unbounded. */
  readonly maxDelayMs: number | null;
}

/** What happened: `inserted`, `debounced` (the occupant took the state), or `occupied` (it had started). */
export type DebounceOutcome = 'inserted' | 'debounced' | 'occupied';

/** One answer of INSERT_OR_DEBOUNCE. */
export interface DebounceAnswer extends InsertedInstance {
  readonly outcome: DebounceOutcome;
}

/**
 * `insert({ onConflict: 'debounce' })` (docs/identity.md "Conflict modes"), one statement:
 * - `occ`: the key's occupant (gen_durable_correlation, guard = `$9`) while still runnable and
 *   never claimed (`claim_seq` 0, so never started) takes the new state `$4` and its start
 *   moves to now + `$23` ms, but never past its insert + `$24` ms (NULL: unbounded). The UPDATE
 *   waits for a claim that locked the row and then re-checks it: a claimed occupant is not
 *   touched.
 * - `ins`: with no such occupant, the row of INSERT_INSTANCE (`$1`…`$22`), its start already
 *   now + `$23` ms (the caller's `delayMs`).
 * - else the holder (an occupant that started, an ended one whose scope keeps the key, a
 *   dedup window): `occupied`, nothing stored.
 * NOTE: two debounced inserts racing on a free key both find no occupant; one inserts, the
 * other waits on the unique index, skips and sees no holder in its snapshot: no row comes
 * back, and the caller runs the statement again, which then debounces the occupant.
 */
export const INSERT_OR_DEBOUNCE = sql(
  'insert_or_debounce',
  `WITH occ AS (
     UPDATE {schema}.gen_durable g
        SET state = $4::text::jsonb,
            eligible_at = LEAST(now() + make_interval(secs => $23::float8 / 1000),
                                COALESCE(g.inserted_at + make_interval(secs => $24::float8 / 1000), 'infinity')),
            updated_at = now()
      WHERE g.correlation_guard = $9::text AND g.status = 'runnable' AND g.claim_seq = 0
      RETURNING g.id, g.queue, g.eligible_at <= now() AS due
   ), ins AS (
     INSERT INTO {schema}.gen_durable
       ${INSERT_ROW_COLUMNS}
     ${insertRowSelect(0)}
       AND NOT EXISTS (SELECT 1 FROM occ)
     ON CONFLICT (correlation_guard) WHERE correlation_guard IS NOT NULL DO NOTHING
     RETURNING id, queue, eligible_at <= now() AS due
   )
   SELECT id, queue, due, 'inserted' AS outcome FROM ins
   UNION ALL
   SELECT id, queue, due, 'debounced' FROM occ
   UNION ALL
   SELECT h.id, h.queue, false, 'occupied'
     FROM ${keyHolderSelect(0)} h
    WHERE NOT EXISTS (SELECT 1 FROM ins) AND NOT EXISTS (SELECT 1 FROM occ)
   LIMIT 1`,
  {
    params: (i: DebounceInput) => [...insertRowParams(i.row), i.debounceMs, i.maxDelayMs],
    /** The answer; null: a holder committed after the snapshot (run it again). */
    decode: (rows: readonly DebounceAnswer[]): DebounceAnswer | null => rows[0] ?? null,
  },
);
