import type { StatementRunner } from '../sql/statement';
import type { InstanceCount } from './instance-filter';
import { InstanceQuery } from './instance-query';

/** The statuses a step count covers: rows at that step that have not ended. */
const LIVE = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'] as const;

/**
 * Live instances per step of one FSM, for the FSM page's graph (docs/design.md §30): one
 * `count` per step (`{ fsm, step, status: live }`), each counting at most `cap` matches through
 * the index its filter allows (`capped: true`: at least that many; `exact: false`: its time
 * budget ran out first).
 * Nest-free.
 */
export async function readStepCounts(
  sql: StatementRunner,
  fsm: string,
  steps: readonly string[],
  cap = 10_000,
): Promise<Record<string, InstanceCount>> {
  const query = new InstanceQuery(sql);
  const counts: Record<string, InstanceCount> = {};
  for (const step of steps) {
    counts[step] = await query.count({ fsm, step, status: [...LIVE] }, { cap });
  }
  return counts;
}
