import { noRows } from './row-decoders';
import { sql } from './statement';

// Cross-node pokes over PostgreSQL (docs/design.md §16.4). None of these touches a table or an index.

/**
 * Announces runnable work: `$1` channel (`gen_durable:<schema>:<engine>:poke`), `$2` payload
 * (`<sender>|<queue>`). Runs on the pool as its own autocommit statement, after the insert,
 * signal or flush that made the work runnable has committed — never inside that transaction:
 * a NOTIFY takes a cluster-wide queue lock at commit, which would serialize every committing
 * insert behind it.
 */
export const NOTIFY_POKE = sql('notify_poke', `SELECT pg_notify($1, $2)`, {
  params: (i: { readonly channel: string; readonly payload: string }) => [i.channel, i.payload],
  decode: noRows,
});

/**
 * The listener's delivery probe (after each LISTEN): the same NOTIFY as NOTIFY_POKE with
 * payload `gd-probe|<nonce>`, named apart so statement counts of pokes stay exact. Through a
 * transaction pooler it never reaches the LISTEN session, which is how the engine finds out.
 */
export const NOTIFY_PROBE = sql('notify_probe', `SELECT pg_notify($1, $2)`, {
  params: (i: { readonly channel: string; readonly payload: string }) => [i.channel, i.payload],
  decode: noRows,
});

/**
 * Subscribes the dedicated listener connection. LISTEN takes an identifier, not a parameter:
 * the transport replaces `{channel}` with the quoted channel name (fixed per engine), as the
 * executor does for `{schema}`. Sent as a simple query (utility statements are not prepared).
 */
export const LISTEN_POKES = sql('listen_pokes', `LISTEN {channel}`);

/**
 * Liveness probe of the idle listener connection, every `heartbeatInterval`: TCP keepalive
 * alone takes minutes to notice a silently dropped link, during which pokes would be lost.
 */
export const POKE_LISTENER_PING = sql('poke_listener_ping', `SELECT 1`);
