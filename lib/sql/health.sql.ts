import type { QueueBacklog } from '../instance/queue-status';
import { sql } from './statement';

/** Expired leases and overdue deadlines past the grace, each capped (HEALTH_LEASE_BACKLOG). */
export interface LeaseBacklog {
  readonly expired: number;
  readonly overdue: number;
}

/**
 * Lease backlog (docs/design.md §21): executing rows whose lease expired more than `$1` ms ago (index
 * gen_durable_lease) and parked rows overdue by more than `$1` ms (index
 * gen_durable_await_deadline), each count capped at `$2` rows.
 */
export const HEALTH_LEASE_BACKLOG = sql(
  'health_lease_backlog',
  `SELECT
     (SELECT count(*)::int FROM (
        SELECT 1 FROM {schema}.gen_durable
         WHERE status = 'executing' AND lease_expires_at < now() - make_interval(secs => $1::float8 / 1000)
         LIMIT $2) e) AS expired,
     (SELECT count(*)::int FROM (
        SELECT 1 FROM {schema}.gen_durable
         WHERE status = 'awaiting_signal' AND await_deadline IS NOT NULL
           AND await_deadline < now() - make_interval(secs => $1::float8 / 1000)
         LIMIT $2) d) AS overdue`,
  {
    params: (i: { readonly graceMs: number; readonly cap: number }) => [i.graceMs, i.cap],
    decode: (rows: readonly LeaseBacklog[]): LeaseBacklog => rows[0] ?? { expired: 0, overdue: 0 },
  },
);

/**
 * Runnable backlog (docs/design.md §21): for each queue `$1`, the age of its pick-order head (first due
 * row by priority, eligible_at) and its due depth capped at `$2` — both index-ordered scans
 * of gen_durable_pick that stop early — and its pause (primary key of
 * gen_durable_paused_queues).
 */
export const HEALTH_RUNNABLE_BACKLOG = sql(
  'health_runnable_backlog',
  `SELECT q.queue,
          (extract(epoch FROM now() - h.eligible_at) * 1000)::float8 AS age_ms,
          d.depth, p.queue IS NOT NULL AS paused
     FROM unnest($1::text[]) AS q(queue)
     LEFT JOIN {schema}.gen_durable_paused_queues p ON p.queue = q.queue
     LEFT JOIN LATERAL (
       SELECT eligible_at FROM {schema}.gen_durable
        WHERE queue = q.queue AND status = 'runnable' AND eligible_at <= now()
        ORDER BY priority, eligible_at LIMIT 1) h ON true
     LEFT JOIN LATERAL (
       SELECT count(*)::int AS depth FROM (
         SELECT 1 FROM {schema}.gen_durable
          WHERE queue = q.queue AND status = 'runnable' AND eligible_at <= now()
          LIMIT $2) x) d ON true
    ORDER BY q.queue`,
  {
    params: (i: { readonly queues: readonly string[]; readonly depthCap: number }) => [
      i.queues,
      i.depthCap,
    ],
    decode: (
      rows: readonly { queue: string; age_ms: number | null; depth: number; paused: boolean }[],
    ) => {
      const out = new Array<QueueBacklog>(rows.length);
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i]!;
        out[i] = { queue: r.queue, headAgeMs: r.age_ms, depth: r.depth, paused: r.paused };
      }
      return out;
    },
  },
);
