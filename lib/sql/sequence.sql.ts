import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** What BLOCKED_SEQUENCES is asked: at most `limit` keys, or only `key`. */
export interface BlockedSequencesInput {
  readonly limit: number;
  readonly key: string | null;
}

/** One key with rows waiting behind its head, as BLOCKED_SEQUENCES answers it. */
export interface BlockedSequenceRow {
  readonly key: string;
  readonly headId: string;
  readonly headStatus: DurableStatus;
  readonly headStep: string;
  readonly headError: string | null;
  readonly headHeld: boolean;
  readonly headDue: boolean;
  /** The head ran before: attempt > 0 or reaped (a not-yet-due head is then retrying). */
  readonly headRan: boolean;
  readonly waiting: number;
  readonly waitingSince: Date;
}

interface BlockedSequenceRecord {
  readonly key: string;
  readonly head_id: string;
  readonly head_status: DurableStatus;
  readonly head_step: string;
  readonly head_error: string | null;
  readonly head_held: boolean;
  readonly head_due: boolean;
  /** The head ran before: attempt > 0 or reaped (a not-yet-due head is then retrying). */
  readonly head_ran: boolean;
  readonly waiting: number;
  readonly waiting_since: Date;
}

/** The rows that hold their sequence key: the predicate of gen_durable_sequence, on alias `a`. */
export function holdsKey(a: string): string {
  return `${a}.sequence_key IS NOT NULL
          AND (${a}.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
               OR (${a}.status = 'failed' AND ${a}.on_head_failure = 'block'))`;
}

/**
 * `blockedSequences` (docs/sequences.md "Seeing held keys"): the keys with rows waiting behind
 * their head, one row per key, the longest waiting first (`$1` limit, `$2` one key or NULL).
 * `keys` groups gen_durable_sequence (index-only, in key order; `$2` an index condition) over
 * the rows that hold their key: the head is the smallest id, the others wait. The head's row by
 * primary key; the oldest waiter's insert by one `LIMIT 1` probe of the same index. Its cost
 * grows with the number of rows that hold a key: an operator's read.
 */
export const BLOCKED_SEQUENCES = sql(
  'blocked_sequences',
  `WITH keys AS (
     SELECT a.sequence_key AS key, min(a.id) AS head_id, count(*) - 1 AS waiting
       FROM {schema}.gen_durable a
      WHERE ${holdsKey('a')} AND ($2::text IS NULL OR a.sequence_key = $2::text)
      GROUP BY a.sequence_key
     HAVING count(*) > 1
   )
   SELECT k.key, k.head_id::text AS head_id, h.status AS head_status, h.step AS head_step,
          h.last_error AS head_error, h.held_at IS NOT NULL AS head_held,
          h.eligible_at <= now() AS head_due, h.attempt > 0 OR h.reaps > 0 AS head_ran,
          k.waiting::int AS waiting,
          (SELECT w.inserted_at FROM {schema}.gen_durable w
            WHERE w.sequence_key = k.key AND w.id > k.head_id AND ${holdsKey('w')}
            ORDER BY w.id LIMIT 1) AS waiting_since
     FROM keys k JOIN {schema}.gen_durable h ON h.id = k.head_id
    ORDER BY waiting_since, k.key
    LIMIT $1`,
  {
    params: (i: BlockedSequencesInput) => [i.limit, i.key],
    decode: (rows: readonly BlockedSequenceRecord[]): BlockedSequenceRow[] =>
      rows.map((r) => ({
        key: r.key,
        headId: r.head_id,
        headStatus: r.head_status,
        headStep: r.head_step,
        headError: r.head_error,
        headHeld: r.head_held,
        headDue: r.head_due,
        headRan: r.head_ran,
        waiting: r.waiting,
        waitingSince: r.waiting_since,
      })),
  },
);

/** What SKIP_SEQUENCE_HEAD answered for the row it found. */
export interface SkipHeadAnswer {
  readonly id: string;
  readonly fsm: string;
  readonly status: DurableStatus;
  readonly queue: string;
  readonly sequenceKey: string | null;
  readonly onHeadFailure: string | null;
  /** The row was switched from `'block'` to `'skip'`. */
  readonly changed: boolean;
}

interface SkipHeadRecord {
  id: string;
  fsm: string;
  status: DurableStatus;
  queue: string;
  sequence_key: string | null;
  on_head_failure: string | null;
  changed: boolean;
}

/**
 * `skipSequenceHead` (docs/sequences.md "When the head fails"): a failed row with a sequence
 * key under `'block'` (`$1`, by primary key) switches to `'skip'`, which takes it out of
 * gen_durable_sequence, so the next row of its key can be claimed. The WHERE re-checks the
 * status and policy on the locked version. Answers the row as found (none: no such row).
 */
export const SKIP_SEQUENCE_HEAD = sql(
  'skip_sequence_head',
  `WITH t AS (
     SELECT g.id, g.fsm, g.status, g.queue, g.sequence_key, g.on_head_failure
       FROM {schema}.gen_durable g WHERE g.id = $1::bigint
   ), u AS (
     UPDATE {schema}.gen_durable g SET on_head_failure = 'skip', updated_at = now()
       FROM t
      WHERE g.id = t.id AND g.status = 'failed' AND g.on_head_failure = 'block'
     RETURNING g.id
   )
   SELECT t.id::text AS id, t.fsm, t.status, t.queue, t.sequence_key, t.on_head_failure,
          EXISTS (SELECT 1 FROM u) AS changed
     FROM t`,
  {
    params: (i: { readonly id: string }) => [i.id],
    decode: (rows: readonly SkipHeadRecord[]): SkipHeadAnswer | null => {
      const r = rows[0];
      return r
        ? {
            id: r.id,
            fsm: r.fsm,
            status: r.status,
            queue: r.queue,
            sequenceKey: r.sequence_key,
            onHeadFailure: r.on_head_failure,
            changed: r.changed,
          }
        : null;
    },
  },
);
