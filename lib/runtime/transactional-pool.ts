import type { FsmDefinition } from '../discovery/fsm-definition';

/**
 * Connections the engine needs beside those its transactional steps hold: the heartbeat and a
 * flush or claim (docs/transactional-steps.md "Pool size").
 */
const ENGINE_CONNECTIONS = 2;

/**
 * The boot warning when this node's transactional steps could exhaust the DataSource's pool
 * (docs/transactional-steps.md "Pool size"), or undefined: each running transactional step
 * holds a pooled connection for its whole run, so the concurrency of the queues this node runs
 * that serve FSMs with transactional steps, plus the engine's own connections, must fit in
 * `poolMax`. Otherwise heartbeats wait for a connection and leases are lost under load.
 */
export function transactionalPoolWarning(
  definitions: readonly FsmDefinition[],
  queues: Readonly<Record<string, number>>,
  poolMax: number,
): string | undefined {
  const served = new Set<string>();
  for (const d of definitions) {
    if (d.transactional.size > 0 && queues[d.queue] !== undefined) served.add(d.queue);
  }
  if (served.size === 0) return undefined;
  let slots = 0;
  for (const queue of served) slots += queues[queue]!;
  if (slots + ENGINE_CONNECTIONS <= poolMax) return undefined;
  const names = [...served].map((q) => `"${q}"`).join(', ');
  return (
    `transactional steps on queue(s) ${names} may hold ${slots} pooled connections at once, ` +
    `and the engine needs ${ENGINE_CONNECTIONS} more (heartbeat, flush), but the DataSource's ` +
    `pool has ${poolMax}: raise its \`extra.max\` or lower those queues' concurrency ` +
    `(docs/transactional-steps.md#pool-size)`
  );
}
