import type { SchemaIncrement } from './schema-increment';

/**
 * Version 18: the removal of empty fairness heads (docs/many-tenants.md "Fair claims by key").
 * - `gen_durable_fair_live`, built online: the keyed rows that are live but not runnable
 *   (executing, awaiting a signal or children), by (queue, fairness key, status). A head may be
 *   deleted only when its key has no live row in its queue: such a row goes back to runnable
 *   with no trigger (gen_durable_fair_head fires only on an insert, a move to another queue or a
 *   row coming back from an end), so its head must outlive it. The GC's head sweep
 *   (FAIR_HEADS_DELETE in lib/sql/fairness.sql.ts) probes this index and gen_durable_fair_pick
 *   (the runnable ones) per head; `fairnessHeads` counts a key's executing rows on it
 *   (index-only, `status` is its third column). Partial on keyed rows: plain rows never enter
 *   it; a keyed row enters it when claimed or parked (a status change, which is never HOT:
 *   `status` is in gen_durable_pick's predicate) and leaves it when it is runnable or ends.
 */
export const V018: SchemaIncrement = {
  version: 18,
  up: [],
  down: [],
  concurrentIndexes: [
    {
      name: 'gen_durable_fair_live',
      on: `{schema}.gen_durable (queue, fairness_key, status)
       WHERE fairness_key IS NOT NULL
         AND status IN ('executing', 'awaiting_signal', 'awaiting_children')`,
    },
  ],
};
