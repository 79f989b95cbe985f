import { sql } from './statement';

// Transaction control for the executor's `transaction()`. Sent as simple queries (not prepared).

export const BEGIN = sql('begin', 'BEGIN');
export const COMMIT = sql('commit', 'COMMIT');
export const ROLLBACK = sql('rollback', 'ROLLBACK');

/**
 * BEGIN plus a transaction-local idle timeout (SPEC §26.4), in one round trip so a flush stays
 * BEGIN + UPDATE + COMMIT. `{idleMs}` is replaced by the executor with a validated integer.
 */
export const BEGIN_WITH_IDLE_TIMEOUT = sql(
  'begin',
  'BEGIN; SET LOCAL idle_in_transaction_session_timeout = {idleMs}',
);
