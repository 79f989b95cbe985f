import { idsOf, noRows } from './row-decoders';
import { noParams, sql } from './statement';

// Statements of the testing helpers (gen-durable/testing). Never run by the engine itself.

/** One queue, or null for every queue. */
export interface QueueFilter {
  readonly queue: string | null;
}

/** Pulls future runnable rows to now (drain withScheduled). `$1` queue or NULL. Index gen_durable_pick. */
export const TESTING_PULL_SCHEDULED = sql(
  'testing_pull_scheduled',
  `UPDATE {schema}.gen_durable SET eligible_at = now()
    WHERE status = 'runnable' AND eligible_at > now() AND ($1::text IS NULL OR queue = $1::text)`,
  { params: (i: QueueFilter) => [i.queue], decode: noRows },
);

/** Queues holding due runnable rows. `$1` queue or NULL. Index gen_durable_pick. */
export const TESTING_DUE_QUEUES = sql(
  'testing_due_queues',
  `SELECT DISTINCT queue FROM {schema}.gen_durable
    WHERE status = 'runnable' AND eligible_at <= now() AND ($1::text IS NULL OR queue = $1::text)
    ORDER BY queue`,
  {
    params: (i: QueueFilter) => [i.queue],
    decode: (rows: readonly { queue: string }[]): string[] => {
      const queues = new Array<string>(rows.length);
      for (let i = 0; i < rows.length; i++) queues[i] = rows[i]!.queue;
      return queues;
    },
  },
);

/** Fires every armed await deadline now (fireTimeouts). Index gen_durable_await_deadline. */
export const TESTING_FIRE_ALL_DEADLINES = sql(
  'testing_fire_all_deadlines',
  `UPDATE {schema}.gen_durable
      SET status = 'runnable', eligible_at = now(), await_deadline = NULL, updated_at = now()
    WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL
    RETURNING id`,
  { params: noParams, decode: idsOf },
);

/**
 * The latest row that ever held a correlation key, finished or not (testing `get`). No index
 * serves `correlation_key` alone (only the guard): a scan, acceptable in tests only.
 */
export const TESTING_LATEST_BY_KEY = sql(
  'testing_latest_by_key',
  `SELECT id FROM {schema}.gen_durable WHERE correlation_key = $1 ORDER BY id DESC LIMIT 1`,
  {
    params: (i: { readonly correlationKey: string }) => [i.correlationKey],
    decode: (rows: readonly { id: string }[]): string | null => rows[0]?.id ?? null,
  },
);

/** Empties instances, inboxes and limiter counters (limit configs are kept: they are seeded at boot). */
export const TESTING_RESET = sql(
  'testing_reset',
  `TRUNCATE {schema}.gen_durable_signals, {schema}.gen_durable, {schema}.gen_durable_buckets RESTART IDENTITY CASCADE`,
  { params: noParams, decode: noRows },
);
