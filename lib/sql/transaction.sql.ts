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

/**
 * The server-side bound of a transactional step's transaction (docs/transactional-steps.md),
 * run first in it: `idle_in_transaction_session_timeout` for this transaction only
 * (`set_config(…, true)` is `SET LOCAL`), so a worker that went dark mid-step releases the
 * user's row locks once the transaction sat idle that long. `$1` = the bound, ms, as text.
 * Touches no table or index.
 */
export const STEP_TRANSACTION_BOUNDS = sql(
  'step_transaction_bounds',
  `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`,
  {
    params: (input: { idleMs: number }) => [String(Math.max(1, Math.floor(input.idleMs)))],
    decode: (): void => undefined,
  },
);
