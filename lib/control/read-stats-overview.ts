import type { SqlExecutor } from '../db/sql-executor';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { CappedCount } from '../instance/queue-status';
import type {
  OverviewPoint,
  QueueOverview,
  StatsOverview,
  StatsOverviewOptions,
} from './stats-overview';
import { QUEUE_STATUS, SET_LOCAL_NO_JIT } from '../sql/queue.sql';
import {
  CURRENT_MINUTE,
  LATEST_STATS,
  type SnapshotCountName,
  type SnapshotRecord,
  STATS_SERIES,
} from '../sql/stats.sql';

const MINUTE_MS = 60_000;
const DEFAULT_MINUTES = 60;
const DEFAULT_CAP = 10_000;

/**
 * The dashboard's overview (docs/design.md §30; docs/dashboard-data.md): per queue the newest
 * snapshot's counts and a sparkline of rows ended per minute over the last `minutes`, from
 * gen_durable_stats (three index-served statements). With no snapshot stored yet, per queue
 * live counts capped at `cap` (runnable, scheduled, executing: `queueStatus`'s statement) and
 * no series. `queues` are listed even with nothing counted. Nest-free: the client reuses it.
 */
export async function readOverview(
  sql: SqlExecutor,
  options: StatsOverviewOptions = {},
  queues: readonly string[] = [],
): Promise<StatsOverview> {
  const { minutes, cap } = checkOptions(options);
  const latest = await LATEST_STATS.run(sql);
  const now = await CURRENT_MINUTE.run(sql);
  if (latest.length === 0) return liveOverview(sql, now, minutes, cap, queues);
  const series = await STATS_SERIES.run(sql, { minutes: minutes + 1 });
  const at = (latest[0] as SnapshotRecord).at;
  const byQueue = new Map(latest.map((r) => [r.queue, r]));
  const names = [...new Set([...byQueue.keys(), ...queues, ...series.map((r) => r.queue)])].sort();
  return {
    source: 'snapshot',
    at,
    stale: now.getTime() - at.getTime() > 2 * MINUTE_MS,
    minutes,
    queues: names.map((queue) => queueOverview(queue, byQueue.get(queue), series, now, minutes)),
  };
}

function queueOverview(
  queue: string,
  row: SnapshotRecord | undefined,
  series: readonly SnapshotRecord[],
  now: Date,
  minutes: number,
): QueueOverview {
  const count = (name: SnapshotCountName): CappedCount => ({
    count: row?.counts[name] ?? 0,
    capped: row?.capped.includes(name) ?? false,
  });
  // A snapshot written in minute M counts the rows ended in minute M − 1.
  const ended = new Map<number, SnapshotRecord>();
  for (const r of series) if (r.queue === queue) ended.set(r.at.getTime() - MINUTE_MS, r);
  const points: OverviewPoint[] = [];
  for (let i = minutes; i >= 1; i--) {
    const at = new Date(now.getTime() - i * MINUTE_MS);
    const r = ended.get(at.getTime());
    points.push({
      at,
      done: r?.counts.done ?? 0,
      failed: r?.counts.failed ?? 0,
      cancelled: r?.counts.cancelled ?? 0,
    });
  }
  return {
    queue,
    counts: {
      runnable: count('runnable'),
      scheduled: count('scheduled'),
      executing: count('executing'),
      awaitingSignal: count('awaiting_signal'),
      awaitingChildren: count('awaiting_children'),
      done: count('done'),
      failed: count('failed'),
      cancelled: count('cancelled'),
    },
    oldestRunnableAt: row?.oldestRunnableAt ?? null,
    series: points,
  };
}

/** No snapshot stored: `queueStatus`'s capped counts, now (one read-only transaction). */
async function liveOverview(
  sql: SqlExecutor,
  now: Date,
  minutes: number,
  cap: number,
  queues: readonly string[],
): Promise<StatsOverview> {
  const rows = await sql.transaction(async (tx) => {
    await SET_LOCAL_NO_JIT.run(sql, undefined, tx);
    return QUEUE_STATUS.run(sql, { queues: [...queues], cap, only: null }, tx);
  });
  return {
    source: 'live',
    at: now,
    stale: false,
    minutes,
    queues: rows
      .map((r) => ({
        queue: r.queue,
        counts: {
          runnable: r.runnable,
          scheduled: {
            count: Math.max(0, r.runnable.count - r.due.count),
            capped: r.runnable.capped,
          },
          executing: r.executing,
          awaitingSignal: null,
          awaitingChildren: null,
          done: null,
          failed: null,
          cancelled: null,
        },
        oldestRunnableAt: null,
        series: [],
      }))
      .sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0)),
  };
}

function checkOptions(options: unknown): { minutes: number; cap: number } {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidInputError('stats.options', 'must be an object { minutes?, cap? }');
  }
  const { minutes = DEFAULT_MINUTES, cap = DEFAULT_CAP } = options as Record<string, unknown>;
  if (typeof minutes !== 'number' || !Number.isInteger(minutes) || minutes < 1 || minutes > 1440) {
    throw new InvalidInputError('stats.minutes', 'must be an integer in 1..1440');
  }
  if (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 1 || cap > 1_000_000) {
    throw new InvalidInputError('stats.cap', 'must be an integer in 1..1000000');
  }
  return { minutes, cap };
}
