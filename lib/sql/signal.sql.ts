import type { DurableStatus } from '../gen-durable.constants';
import { sql } from './statement';

/** One delivery: to `targetId`, else to the occupant of `correlationKey`. */
export interface SignalDelivery {
  readonly targetId: string | null;
  readonly correlationKey: string | null;
  readonly name: string;
  /** The payload as JSON text. */
  readonly payloadText: string;
  readonly dedupKey: string | null;
  /**
   * The W3C trace context of the signalling code, stored on the signal row (docs/design.md
   * §31); absent = none.
   */
  readonly traceContext?: string | null;
}

/**
 * The target a delivery reached: a live one with its status after the delivery (`inserted`
 * false for a duplicate), or a duplicate whose target is no longer live (a retry after the
 * instance consumed the signal and finished), with no queue and no status.
 */
export type DeliveredSignal =
  | {
      readonly id: string;
      readonly queue: string;
      readonly status: DurableStatus;
      readonly due: boolean;
      readonly inserted: boolean;
    }
  | {
      readonly id: string;
      readonly queue: null;
      readonly status: null;
      readonly due: false;
      readonly inserted: false;
    };

/**
 * Signal delivery, one statement (docs/design.md §8.1, §26.6, §26.7). `$1` target id or NULL, `$2`
 * correlation key or NULL (resolved through gen_durable_correlation), `$3` name, `$4` payload
 * JSON text, `$5` dedup key or NULL, `$6` the sender's W3C trace context or NULL.
 * - target: lock the target FIRST by updating it by id with a live-status WHERE, which is
 *   re-evaluated after the row lock, so a target that terminated meanwhile drops out; the
 *   flip (awaiting_signal and name ∈ awaits ⇒ runnable, eligible now) sits in a CASE so a
 *   park that commits first is seen after its lock (docs/design.md §8.4). A dedup key already stored
 *   for the instance's life (consumed or not) flips nothing.
 *   The same update sets `signaled` (schema v2): a flush that finds it false on a row it holds
 *   locked knows the inbox is empty and skips the terminal inbox sweep.
 * - the inbox row is inserted only from that update's result; ON CONFLICT (target_id,
 *   dedup_key) DO NOTHING makes a redelivery a no-op.
 * Returns one row per live target: `inserted` false = duplicate. A target that is no longer
 * live but still exists and already stored this dedup key (the webhook retried after the
 * instance consumed the signal and finished) returns one row too, `inserted` false and no
 * status: the retry is the duplicate it is, not `NoTargetError` (docs/reliability.md, "After
 * an ambiguous answer"). By correlation key, a finished instance no longer holds the key, so
 * such a retry still finds no target.
 * Indexes: the target by the PK or gen_durable_correlation (guard = key); the dedup probe and
 * the conflict by gen_durable_signals_target_dedup (target_id, dedup_key).
 * NOTE: the dedup probe reads the statement's snapshot, taken before the row lock. Two
 * concurrent deliveries of one dedup key both see "new"; the second waits on the row lock,
 * finds the row no longer parked (the first flipped it) and its insert conflicts, so it wakes
 * nothing — unless the two carry different names and the row parks on the second's only.
 */
export const DELIVER_SIGNAL = sql(
  'deliver_signal',
  `WITH resolved AS (
     SELECT id FROM {schema}.gen_durable WHERE id = $1::bigint
     UNION ALL
     SELECT id FROM {schema}.gen_durable WHERE $1::bigint IS NULL AND correlation_guard = $2::text
     LIMIT 1
   ), dup AS (
     SELECT EXISTS (SELECT 1 FROM {schema}.gen_durable_signals s, resolved r
                     WHERE $5::text IS NOT NULL AND s.target_id = r.id AND s.dedup_key = $5::text) AS seen
   ), target AS (
     UPDATE {schema}.gen_durable g
        SET status = CASE WHEN g.status = 'awaiting_signal' AND $3::text = ANY (g.awaits) AND NOT dup.seen
                          THEN 'runnable'::{schema}.gen_durable_status ELSE g.status END,
            eligible_at = CASE WHEN g.status = 'awaiting_signal' AND $3::text = ANY (g.awaits) AND NOT dup.seen
                               THEN now() ELSE g.eligible_at END,
            await_deadline = CASE WHEN g.status = 'awaiting_signal' AND $3::text = ANY (g.awaits) AND NOT dup.seen
                                  THEN NULL ELSE g.await_deadline END,
            signaled = true
       FROM resolved, dup
      WHERE g.id = resolved.id
        AND g.status IN ('runnable', 'executing', 'awaiting_signal', 'awaiting_children')
      RETURNING g.id, g.queue, g.status, g.eligible_at <= now() AS due
   ), ins AS (
     INSERT INTO {schema}.gen_durable_signals (target_id, name, payload, dedup_key, trace_context)
     SELECT target.id, $3::text, $4::text::jsonb, $5::text, $6::text FROM target
     ON CONFLICT (target_id, dedup_key) DO NOTHING
     RETURNING id
   )
   SELECT target.id, target.queue, target.status, target.due, (SELECT count(*) FROM ins) > 0 AS inserted
     FROM target
   UNION ALL
   SELECT r.id, NULL::text, NULL::{schema}.gen_durable_status, false, false
     FROM resolved r, dup
    WHERE dup.seen AND NOT EXISTS (SELECT 1 FROM target)`,
  {
    params: (i: SignalDelivery) => [
      i.targetId,
      i.correlationKey,
      i.name,
      i.payloadText,
      i.dedupKey,
      i.traceContext ?? null,
    ],
    /** The target the signal reached, or null: no live instance answers (and no duplicate). */
    decode: (rows: readonly DeliveredSignal[]): DeliveredSignal | null => rows[0] ?? null,
  },
);
