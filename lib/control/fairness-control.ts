import { InvalidInputError } from '../errors/invalid-input.error';
import { FAIRNESS_HEADS, type FairnessHeadRow } from '../sql/fairness.sql';
import type { StatementRunner } from '../sql/statement';
import type { FairnessHead, FairQueueHeads } from './fairness-head';
import { integerIn, optionsObject } from './input-checks';

/** The most heads per queue one `fairnessHeads` answers. */
const MAX_HEADS = 1_000;
/** The largest count cap. */
const MAX_CAP = 100_000;

/**
 * `fairnessHeads({ queue?, limit?, cap? })` (docs/many-tenants.md "Seeing the heads"): each fair
 * queue's heads in the fair claim's order, with capped counts per key and the row the claim
 * serves next, by one FAIRNESS_HEADS. `InvalidInputError` naming a bad option. Nest-free.
 */
export async function readFairnessHeads(
  sql: StatementRunner,
  options: unknown,
): Promise<FairQueueHeads[]> {
  const o = optionsObject(options, ['queue', 'limit', 'cap'], 'fairnessHeads.options', {
    nameKey: true,
  });
  const queue = o?.['queue'];
  if (queue !== undefined && (typeof queue !== 'string' || queue.length === 0)) {
    throw new InvalidInputError('fairnessHeads.queue', 'must be a non-empty string (a queue name)');
  }
  const limit = integerIn(o?.['limit'], 'fairnessHeads.limit', 100, 1, MAX_HEADS);
  const cap = integerIn(o?.['cap'], 'fairnessHeads.cap', 1_000, 1, MAX_CAP);
  const rows = await FAIRNESS_HEADS.run(sql, { queue: queue ?? null, limit, cap });
  const out: FairQueueHeads[] = [];
  let current: { queue: string; keys: number; heads: FairnessHead[] } | undefined;
  for (const r of rows) {
    if (current?.queue !== r.queue) {
      current = { queue: r.queue, keys: r.keys, heads: [] };
      out.push({ queue: current.queue, keys: capped(r.keys, cap), heads: current.heads });
    }
    current.heads.push(head(r, cap));
  }
  return out;
}

function capped(n: number, cap: number): { count: number; capped: boolean } {
  return { count: Math.min(n, cap), capped: n > cap };
}

function head(r: FairnessHeadRow, cap: number): FairnessHead {
  return {
    key: r.key,
    vtime: r.vtime,
    runnable: capped(r.runnable, cap),
    due: capped(r.due, cap),
    executing: capped(r.executing, cap),
    next:
      r.headId !== null && r.headEligibleAt !== null
        ? {
            id: r.headId,
            priority: r.headPriority ?? 0,
            eligibleAt: r.headEligibleAt,
            ageMs: Math.max(0, Math.round(r.headAgeMs ?? 0)),
            weight: r.headWeight ?? 1,
          }
        : null,
  };
}
