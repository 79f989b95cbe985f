import type { CappedCount } from '../instance/queue-status';
import type { StatementRunner } from '../sql/statement';
import { InstanceQuery } from './instance-query';

/** The statuses a step count covers: rows at that step that have not ended. */
const LIVE = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'] as const;

/**
 * Live instances per step of one FSM, for the FSM page's graph (docs/design.md §30): one
 * `count` per step (`{ fsm, step, status: live }`), each examining at most `cap` rows through
 * the index its filter allows, so a count is capped (`capped: true`: at least that many).
 * Nest-free.
 */
export async function readStepCounts(
  sql: StatementRunner,
  fsm: string,
  steps: readonly string[],
  cap = 10_000,
): Promise<Record<string, CappedCount>> {
  const query = new InstanceQuery(sql);
  const counts: Record<string, CappedCount> = {};
  for (const step of steps) {
    counts[step] = await query.count({ fsm, step, status: [...LIVE] }, { cap });
  }
  return counts;
}
