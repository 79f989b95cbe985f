import { sql } from './statement';

// Transaction control for the executor's `transaction()`. Sent as simple queries (not prepared).

export const COMMIT = sql('commit', 'COMMIT');
export const ROLLBACK = sql('rollback', 'ROLLBACK');

/**
 * BEGIN plus the transaction-local server-side bounds (docs/design.md §26.4), in one round trip
 * so a flush stays BEGIN + UPDATE + COMMIT: `{statementMs}`, `{lockMs}` and `{idleMs}` are
 * replaced by the executor with validated integers (ms). Touches no table.
 */
export const BEGIN_WITH_TIMEOUTS = sql(
  'begin',
  'BEGIN; SET LOCAL statement_timeout = {statementMs}; SET LOCAL lock_timeout = {lockMs}; ' +
    'SET LOCAL idle_in_transaction_session_timeout = {idleMs}',
);
