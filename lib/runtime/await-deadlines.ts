import type { SqlExecutor } from '../db/sql-executor';
import { FIRE_AWAIT_DEADLINES } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';

/** Most overdue awaits one firing turns runnable. */
const BATCH = 10_000;

/**
 * Fires overdue await deadlines (docs/design.md §8.5): `FIRE_AWAIT_DEADLINES` turns each
 * overdue parked row runnable, eligible now; their queues are poked (so the timeout step runs
 * at once, not at the next poll) and `await:timeout` counts them. Skip-locked, so the reaper's
 * sweep on any node and this node's local deadline timers may run it side by side. Returns
 * how many fired.
 */
export async function fireAwaitDeadlines(
  sql: SqlExecutor,
  telemetry: Telemetry,
  poke: (queues: Iterable<string>) => void,
): Promise<number> {
  const fired = await FIRE_AWAIT_DEADLINES.run(sql, { limit: BATCH });
  if (fired.length > 0) {
    telemetry.emit('await:timeout', { count: fired.length }, {});
    poke(new Set(fired.map((r) => r.queue)));
  }
  return fired.length;
}
