import type { PoolClient } from 'pg';

import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { readResolved } from '../control/read-target';
import { resolveTarget } from '../control/target';
import type { SqlExecutor } from '../db/sql-executor';
import { validateWithSchema } from '../fsm/schema-validation';

/**
 * A signal's payload validated by the payload schema its target's FSM declares for `name`
 * (docs/schemas.md): the schema's output, which is what gets stored. With `fsm` (the typed
 * `signal(Fsm, …)`) that FSM's schema, no statement; else, only when some registered FSM
 * declares a schema for `name`, one read of the target names its FSM (in the caller's
 * transaction when `connect` gives one, so a target inserted in it is found). No schema: `payload`
 * unchanged. A refused payload throws `InvalidInputError` at `signal.payload…`, before anything
 * is stored; a target that does not exist is left to the delivery (`NoTargetError`).
 */
export async function schemaPayload(
  registry: FsmRegistry,
  sql: SqlExecutor,
  fsm: FsmDefinition | undefined,
  target: unknown,
  name: unknown,
  payload: unknown,
  connect?: () => Promise<PoolClient | undefined>,
): Promise<unknown> {
  if (typeof name !== 'string') return payload;
  let definition = fsm;
  if (definition === undefined) {
    if (!registry.hasSignalSchema(name)) return payload;
    const to = resolveTarget(target, 'signal.target');
    const view = await readResolved(sql, to, await connect?.());
    if (view === null) return payload;
    definition = registry.find(view.fsm, view.fsmVersion);
  }
  const schema = definition?.signalSchemas.get(name);
  return schema === undefined ? payload : validateWithSchema(schema, payload, 'signal.payload');
}
