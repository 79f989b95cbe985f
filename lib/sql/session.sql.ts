import { noParams, sql } from './statement';

// What a server is right now, for multiHostClient (lib/db/multi-host-client.ts). Touches no
// table or index; runs on a short-lived probe client before the real connection is made.

/** A row of SESSION_ROLE as the server sends it. */
interface SessionRoleRecord {
  readonly recovery: boolean;
  readonly read_only: string;
}

/** Whether the server accepts writes: not in recovery, default_transaction_read_only off. */
export interface SessionRole {
  readonly inRecovery: boolean;
  readonly readOnlyByDefault: boolean;
}

/**
 * libpq's `target_session_attrs=read-write` test: `pg_is_in_recovery()` (a standby) and the
 * `default_transaction_read_only` setting of this session.
 */
export const SESSION_ROLE = sql(
  'session_role',
  `SELECT pg_is_in_recovery() AS recovery,
          current_setting('default_transaction_read_only') AS read_only`,
  {
    params: noParams,
    decode: (rows: readonly SessionRoleRecord[]): SessionRole => ({
      inRecovery: rows[0]?.recovery === true,
      readOnlyByDefault: rows[0]?.read_only === 'on',
    }),
  },
);
