import type { SchemaIncrement } from './schema-increment';

/**
 * Version 7: `suspect`, true once the row reached the poison-pill cap (`reaper.maxReaps` counted
 * losses). A suspect is not failed at once: the node that claims it next runs it alone, with
 * nothing else in flight, and only a loss during that solo run fails it (docs/design.md §26.5;
 * docs/reliability.md, finding F-R11). Every committed outcome clears it with `reaps`. The claim
 * returns it, so finding a suspect costs no statement. `NOT NULL DEFAULT false` on PostgreSQL
 * 11+ rewrites nothing.
 */
export const V007: SchemaIncrement = {
  version: 7,
  up: [`ALTER TABLE {schema}.gen_durable ADD COLUMN suspect boolean NOT NULL DEFAULT false`],
  down: [`ALTER TABLE {schema}.gen_durable DROP COLUMN IF EXISTS suspect`],
};
