import type { QueueGaugeReading } from '../telemetry/otel-span-types';
import { noParams, sql } from './statement';

/**
 * The counts of a snapshot that are a queue's depth: rows waiting or running now (`scheduled`:
 * runnable but not yet due). The minute's finished counts (`done`, `failed`, `cancelled`) are
 * not depth and are not reported.
 */
const DEPTH_COUNTS = [
  'runnable',
  'scheduled',
  'executing',
  'awaiting_signal',
  'awaiting_children',
] as const;

interface QueueGaugeRecord {
  queue: string;
  counts: Record<string, unknown> | null;
  oldest_age: number | null;
}

/**
 * The latest `gen_durable_stats` row of each queue (docs/design.md §31: the queue-depth and
 * oldest-runnable-age gauges read the once-a-minute snapshot, never `gen_durable`): among the
 * rows of the ten minutes up to the newest snapshot, the newest per queue. `max(at)` is one
 * probe at the end of the primary key gen_durable_stats_pkey (at, queue), and the window is a
 * range scan of it. An empty table answers no rows (the gauges report nothing).
 */
export const LATEST_QUEUE_STATS = sql(
  'latest_queue_stats',
  `SELECT DISTINCT ON (s.queue) s.queue, s.counts,
          GREATEST(0, EXTRACT(EPOCH FROM (s.at - s.oldest_runnable_at)))::float8 AS oldest_age
     FROM {schema}.gen_durable_stats s
    WHERE s.at >= (SELECT max(m.at) FROM {schema}.gen_durable_stats m) - interval '10 minutes'
    ORDER BY s.queue, s.at DESC`,
  {
    params: noParams,
    decode: (rows: readonly QueueGaugeRecord[]): QueueGaugeReading[] =>
      rows.map((r) => {
        const counts: Record<string, number> = {};
        for (const key of DEPTH_COUNTS) {
          const value = r.counts?.[key];
          if (typeof value === 'number' && Number.isFinite(value)) counts[key] = value;
        }
        return { queue: r.queue, counts, oldestRunnableAgeS: r.oldest_age };
      }),
  },
);
