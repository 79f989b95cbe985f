import type { Pool, PoolClient } from 'pg';

const guardedPools = new WeakSet<Pool>();
const guardedClients = new WeakSet<PoolClient>();

/** Swallows the event: whoever holds the client learns of the error from its query or its own listener. */
function heard(): void {}

/**
 * Gives every client `pool` hands out a permanent `error` listener (docs/reliability.md, the
 * open F-CRASH after F-R1's table), attached in the pool's `acquire` event, which pg-pool emits
 * synchronously as it hands a client over, before any caller's callback. node-postgres emits
 * `error` on a client whose connection dies outside a query (a killed backend, a restart); with
 * no listener that is an uncaught exception that kills the process. The engine's own checkouts
 * listen while they hold a client (SqlExecutor), but a transactional step's connection is
 * checked out through TypeORM's query runner, which attaches its listener a promise tick later
 * and removes it on the first error: an error in that tick, or a second one, went unheard. The
 * listener stays for the client's life and does nothing else: the pool still destroys a client
 * released with an error, and its holder still sees the failure.
 */
export function guardPoolClients(pool: Pool): void {
  if (guardedPools.has(pool)) return;
  guardedPools.add(pool);
  pool.on('acquire', (client: PoolClient) => {
    if (guardedClients.has(client)) return;
    guardedClients.add(client);
    client.on('error', heard);
  });
}
