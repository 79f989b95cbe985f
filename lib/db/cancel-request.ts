import { connect } from 'node:net';

import type { PoolClient } from 'pg';

/** node-postgres keeps these on the client; its typings omit them. */
interface BackendKey {
  readonly processID?: number | null;
  readonly secretKey?: number | null;
  readonly host?: string;
  readonly port?: number;
}

/** The protocol's CancelRequest code (1234 << 16 | 5678). */
const CANCEL_REQUEST_CODE = 80877102;
/** A cancel that does not get through within this long is abandoned (the link is dark). */
const CANCEL_CONNECT_TIMEOUT_MS = 5_000;

/**
 * Asks the server, on a new connection, to cancel what `client`'s backend is running (the
 * PostgreSQL CancelRequest: length 16, the code, the backend's pid and secret). Fire and
 * forget: the answer is the server closing the connection; any failure is ignored. Used after
 * a client-side statement timeout outside a transaction, so the server stops a statement the
 * engine gave up on — one waiting for a lock keeps the locks it already took until then.
 */
export function sendCancelRequest(client: PoolClient): void {
  const key = client as unknown as BackendKey;
  const pid = key.processID;
  const secret = key.secretKey;
  if (typeof pid !== 'number' || typeof secret !== 'number' || key.port === undefined) return;
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(CANCEL_REQUEST_CODE, 4);
  packet.writeInt32BE(pid, 8);
  packet.writeInt32BE(secret, 12);
  const host = key.host ?? 'localhost';
  const socket = host.startsWith('/')
    ? connect({ path: `${host}/.s.PGSQL.${key.port}` })
    : connect({ host, port: key.port });
  socket.setTimeout(CANCEL_CONNECT_TIMEOUT_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('connect', () => socket.end(packet));
  socket.unref();
}
