import type { SchemaIncrement } from './schema-increment';

/**
 * Version 19: an index for parked rows (docs/dashboard-data.md, "Pacing").
 * - `gen_durable_parked`, built online: the rows awaiting a signal or children, by (queue,
 *   status). The stats snapshot's parked counts (WRITE_STATS_SNAPSHOT in lib/sql/stats.sql.ts)
 *   read it index-only instead of reading the whole table, which under a pinned xmin horizon
 *   is the grown table (docs/performance.md, "One walk instead of three"). Partial: a row enters
 *   it only while parked; a row that never parks pays the predicate's check on its non-HOT
 *   updates (1.00–1.01× a claim and a `done` per row, measured against a copy without it).
 */
export const V019: SchemaIncrement = {
  version: 19,
  up: [],
  down: [],
  concurrentIndexes: [
    {
      name: 'gen_durable_parked',
      on: `{schema}.gen_durable (queue, status)
       WHERE status IN ('awaiting_signal', 'awaiting_children')`,
    },
  ],
};
