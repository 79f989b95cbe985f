/**
 * What a failed statement means for the connection it ran on and for a retry:
 * - `connection`: the link or the session is gone or in an unknown state (a reset, a refused
 *   or timed-out connect, a terminated backend, a client-side statement timeout). The client
 *   must be destroyed, never reused; a retry on a fresh connection may succeed.
 * - `transient`: the server refused this attempt for a reason a retry can cure (serialization
 *   failure, deadlock, the engine's own server-side `lock_timeout` / `statement_timeout`). The
 *   connection is still usable after a ROLLBACK.
 * - `permanent`: anything else (a constraint, bad input, a bug): retrying repeats it.
 */
export type ErrorClass = 'connection' | 'transient' | 'permanent';

/**
 * Node's socket and resolver error codes after which the connection is useless. They sit in the
 * same `code` property as a PostgreSQL SQLSTATE, and some are five characters long (EPIPE):
 * a code is read as a SQLSTATE only on a server error (one with a `severity`).
 */
const NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENETRESET',
  'ENOTCONN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_SOCKET_CLOSED',
  'ERR_STREAM_DESTROYED',
  'ERR_STREAM_WRITE_AFTER_END',
]);

/**
 * SQLSTATEs after which the session is gone: class 08 (connection exception) is matched by
 * prefix; 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 57P05 idle
 * session timeout, 25P03 idle-in-transaction timeout (both sent as FATAL).
 */
const SESSION_GONE_STATES: ReadonlySet<string> = new Set([
  '57P01',
  '57P02',
  '57P03',
  '57P05',
  '25P03',
]);

/**
 * SQLSTATEs a retry can cure on the same or another connection: 40001 serialization failure,
 * 40P01 deadlock detected, 55P03 lock not available (the engine's `lock_timeout`), 57014 query
 * canceled (the engine's server-side `statement_timeout`, or its cancel after a client-side
 * timeout).
 */
const TRANSIENT_STATES: ReadonlySet<string> = new Set(['40001', '40P01', '55P03', '57014']);

/**
 * Messages node-postgres and the engine use for a connection that died or a statement that
 * timed out on the client side (these errors carry no `code`).
 */
const CONNECTION_MESSAGES: readonly RegExp[] = [
  /^Connection terminated/i, // "Connection terminated unexpectedly", "… due to connection timeout"
  /is not queryable/i, // "Client has encountered a connection error and is not queryable"
  /^Query read timeout$/i, // node-postgres query_timeout
  /^timeout exceeded when trying to connect$/i, // pg-pool connectionTimeoutMillis
  /^timeout: no database connection within/i, // SqlExecutor's bounded checkout
  /^Client was closed/i,
  /^the pool handed out no client$/i,
];

/** Classifies one error of a statement, a checkout or a transaction (table in the unit test). */
export function classifyError(err: unknown): ErrorClass {
  if (typeof err !== 'object' || err === null) return 'permanent';
  const code = (err as { code?: unknown }).code;
  const severity = (err as { severity?: unknown }).severity;
  if (typeof code === 'string' && typeof severity === 'string') {
    // A server error: `code` is a SQLSTATE.
    if (code.startsWith('08') || SESSION_GONE_STATES.has(code)) return 'connection';
    if (TRANSIENT_STATES.has(code)) return 'transient';
    return 'permanent';
  }
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return 'connection';
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && CONNECTION_MESSAGES.some((re) => re.test(message))) {
    return 'connection';
  }
  return 'permanent';
}

/** True when the connection the error came from must be destroyed, not reused. */
export function isConnectionLevel(err: unknown): boolean {
  return classifyError(err) === 'connection';
}

/** True for errors a retry can cure: connection-class and transient server refusals. */
export function isTransient(err: unknown): boolean {
  return classifyError(err) !== 'permanent';
}
