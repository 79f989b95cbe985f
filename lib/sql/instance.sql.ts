import { sql } from './statement';

const COLUMNS = `id, fsm, fsm_version, step, status, state, result, last_error, attempt, awaits,
       await_deadline, queue, priority, eligible_at, concurrency_key, concurrency_shard, rate_limit,
       weight, locked_by, lease_expires_at, parent_id, children_pending, correlation_key,
       correlation_scope::text[] AS correlation_scope, claim_seq, reaps, inserted_at, updated_at`;

/** One instance by id (PK). */
export const GET_INSTANCE_BY_ID = sql(
  'get_instance_by_id',
  `SELECT ${COLUMNS} FROM {schema}.gen_durable WHERE id = $1`,
);

/**
 * The current occupant of a correlation key (unique index gen_durable_correlation), docs/design.md §2.5,
 * §11: the row whose status is in its key's scope. With the default (live) scope that is the
 * live instance only; a terminal-inclusive scope keeps a finished holder findable until GC
 * (signals to it are still refused, DELIVER_SIGNAL). A freed key finds nothing.
 */
export const GET_INSTANCE_BY_KEY = sql(
  'get_instance_by_key',
  `SELECT ${COLUMNS} FROM {schema}.gen_durable WHERE correlation_guard = $1`,
);

/** Await probe (docs/design.md §9): status of many ids at once (PK lookups). */
export const PROBE_STATUSES = sql(
  'probe_statuses',
  `SELECT id, status FROM {schema}.gen_durable WHERE id = ANY ($1::bigint[])`,
);
