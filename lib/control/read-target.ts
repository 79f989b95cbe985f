import type { PoolClient } from 'pg';

import type { SqlExecutor } from '../db/sql-executor';
import { NoTargetError } from '../errors/no-target.error';
import type { InstanceView } from '../instance/instance-view';
import { GET_INSTANCE_BY_KEY, readInstanceById } from '../sql/instance.sql';
import { type ResolvedTarget, resolveTarget, targetLabel } from './target';

/**
 * The instance a caller's target names (docs/design.md §11), or null: an id's row, or for a
 * correlation key its live occupant, else the most recent ended instance that carried it. One
 * statement (an id missing from the hot table: a second, of the archive). The one read of a target every control operation uses. `InvalidInputError` at `path` for a
 * target of the wrong shape.
 */
export function readTarget(
  sql: SqlExecutor,
  target: unknown,
  path: string,
): Promise<InstanceView | null> {
  return readResolved(sql, resolveTarget(target, path));
}

/** {@link readTarget} of a validated target; `on`: in the caller's transaction. */
export function readResolved(
  sql: SqlExecutor,
  to: ResolvedTarget,
  on?: PoolClient,
): Promise<InstanceView | null> {
  return 'id' in to
    ? readInstanceById(sql, to.id, on)
    : GET_INSTANCE_BY_KEY.run(sql, { correlationKey: to.correlationKey }, on);
}

/**
 * The id a validated target names: an id as given (no statement), a key's current occupant
 * (one statement). `NoTargetError` — "no instance for …: `consequence`" — when the key is free.
 */
export async function targetId(
  sql: SqlExecutor,
  to: ResolvedTarget,
  consequence: string,
): Promise<string> {
  if ('id' in to) return to.id;
  const occupant = await readResolved(sql, to);
  if (occupant === null) throw new NoTargetError(targetLabel(to), consequence);
  return occupant.id;
}
