import { sql } from './statement';

// The node's liveness lock (docs/design.md §17.3): one dedicated connection per node holds a
// transaction-level advisory lock keyed by (schema, engine name, nodeId) for the node's
// lifetime. None of these touches a table or an index.

/**
 * Opens the lock's transaction. It stays open, idle, for the node's lifetime: it assigns no
 * transaction id and, between statements under READ COMMITTED, holds no snapshot, so it pins
 * no xmin horizon; through a transaction pooler (PgBouncer `pool_mode = transaction`) the open
 * transaction keeps one server connection for this client, and a dropped client ends it.
 */
export const NODE_LOCK_BEGIN = sql('node_lock_begin', `BEGIN ISOLATION LEVEL READ COMMITTED`);

/**
 * The open transaction must not be ended by the server's idle timeouts (the pool's
 * `idle_in_transaction_session_timeout`, PostgreSQL 17's `transaction_timeout`): both are set
 * to 0 for this transaction alone (`set_config(…, true)` = SET LOCAL).
 */
export const NODE_LOCK_SETTINGS = sql(
  'node_lock_settings',
  `SELECT set_config('idle_in_transaction_session_timeout', '0', true),
          CASE WHEN current_setting('server_version_num')::int >= 170000
               THEN set_config('transaction_timeout', '0', true) END`,
);

/**
 * Takes the lock if no live session holds it: `$1` = the key text, hashed to a bigint. True
 * proves that the sessions of every earlier process with this nodeId are gone (PostgreSQL
 * releases the lock the moment such a session ends).
 */
export const NODE_LOCK_TRY = sql(
  'node_lock_try',
  `SELECT pg_try_advisory_xact_lock(hashtextextended($1::text, 0)) AS held`,
  {
    params: (i: { readonly key: string }) => [i.key],
    decode: (rows: readonly { held: boolean }[]) => rows[0]?.held === true,
  },
);

/**
 * Liveness probe of the lock's connection, every `heartbeatInterval`, and once right after
 * NODE_LOCK_TRY: sent as a simple query (no parameters), it destroys the try's unnamed portal,
 * whose snapshot would otherwise hold back the xmin horizon until the next ping.
 */
export const NODE_LOCK_PING = sql('node_lock_ping', `SELECT 1`);
