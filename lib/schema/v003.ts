import type { SchemaIncrement } from './schema-increment';

/**
 * Version 3: `started_seq`, the fencing token (`claim_seq`) of the claim under which the row's
 * step last started, recorded only for rows that have already lost a worker (`reaps` > 0) by
 * MARK_STEP_STARTED before their step runs. The reaper counts a later loss toward the
 * poison-pill cap only when `started_seq = claim_seq`: the worker was lost while the row's
 * own step ran, not while the row waited in a buffer (docs/reliability.md, finding F-R11).
 * Nullable, no default to backfill: adding it rewrites nothing.
 */
export const V003: SchemaIncrement = {
  version: 3,
  up: [`ALTER TABLE {schema}.gen_durable ADD COLUMN started_seq bigint`],
  down: [`ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS started_seq`],
};
