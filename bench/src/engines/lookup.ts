// One engine by id, loading only its own module (used by the memory case's child process).
import type { Adapter } from './types';

/** Module and export of each engine: the memory case's child loads only the one it runs. */
const MODULES: Record<string, [string, string]> = {
  'gen-durable': ['./gen-durable', 'genDurableAdapter'],
  'gen-durable:tuned': ['./gen-durable', 'genDurableTuned'],
  'gen-durable:direct-insert': ['./gen-durable', 'genDurableDirectInsert'],
  raw: ['./raw', 'rawAdapter'],
  'raw:batch50': ['./raw', 'rawBatch50Adapter'],
  'graphile-worker': ['./graphile', 'graphileDefault'],
  'graphile-worker:batched': ['./graphile', 'graphileBatched'],
  'pg-boss:b1': ['./pgboss', 'pgBoss1'],
  'pg-boss:b50': ['./pgboss', 'pgBoss50'],
  'bullmq:redis': ['./bullmq', 'bullRedis'],
  'bullmq:postgres': ['./bullmq', 'bullPostgres'],
  dbos: ['./dbos', 'dbosAdapter'],
};

export function findAdapter(id: string): Adapter {
  const m = MODULES[id];
  if (!m) throw new Error(`no engine '${id}'`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(m[0]) as Record<string, Adapter>)[m[1]]!;
}
