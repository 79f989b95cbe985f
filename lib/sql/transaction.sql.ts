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
 * Opens a transactional step's transaction (docs/transactional-steps.md) with its server-side
 * bound, in one round trip (a simple query, not prepared): `START TRANSACTION`, the
 * DataSource's isolation level when it sets one (`{isolation}`: empty, or ` ISOLATION LEVEL …`
 * from a fixed list), and `idle_in_transaction_session_timeout` for this transaction only
 * (`SET LOCAL`), so a worker that went dark mid-step releases the user's row locks once the
 * transaction sat idle that long. `{idleMs}` is replaced with a validated integer (ms).
 * Touches no table or index.
 */
export const STEP_TRANSACTION_BOUNDS = sql(
  'step_transaction_bounds',
  'START TRANSACTION{isolation}; SET LOCAL idle_in_transaction_session_timeout = {idleMs}',
);

/** The isolation levels `START TRANSACTION` accepts (TypeORM's names for PostgreSQL). */
export const STEP_ISOLATION_LEVELS: ReadonlySet<string> = new Set([
  'READ UNCOMMITTED',
  'READ COMMITTED',
  'REPEATABLE READ',
  'SERIALIZABLE',
]);

/**
 * STEP_TRANSACTION_BOUNDS' text for an idle bound of `idleMs` and the DataSource's
 * `isolationLevel`, one of STEP_ISOLATION_LEVELS (checked by the caller) or undefined: the
 * server's default, as TypeORM's own `startTransaction`.
 */
export function stepTransactionBegin(idleMs: number, isolationLevel: string | undefined): string {
  return STEP_TRANSACTION_BOUNDS.text
    .replace(
      '{isolation}',
      isolationLevel === undefined ? '' : ` ISOLATION LEVEL ${isolationLevel}`,
    )
    .replace('{idleMs}', String(Math.max(1, Math.floor(idleMs))));
}
