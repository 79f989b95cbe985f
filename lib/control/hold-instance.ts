import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { HOLD_INSTANCE, RELEASE_INSTANCE } from '../sql/hold.sql';
import { historyLevels } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';
import type { HoldResult } from './hold-options';
import { optionsObject } from './input-checks';
import { readResolved } from './read-target';
import { actorOf } from './instance-history';
import { type ResolvedTarget, targetLabel } from './target';

const MAX_REASON_BYTES = 8 * 1024;

function idOf(target: ResolvedTarget): { id: string | null; correlationKey: string | null } {
  return 'id' in target
    ? { id: target.id, correlationKey: null }
    : { id: null, correlationKey: target.correlationKey };
}

/**
 * The checked `{ reason?, actor? }` of `hold` / `release` (`operation` names them), with the
 * history levels of the FSMs this node knows (docs/design.md §28.1): `InvalidInputError`
 * naming the bad field.
 */
function holdInput(
  runtime: ControlRuntime,
  options: unknown,
  operation: 'hold' | 'release',
): { reason: string | null; actor: string | null; historyOff: string[]; historyFull: string[] } {
  const o = optionsObject(options, ['reason', 'actor'], `${operation}.options`) ?? {};
  const reason = o['reason'];
  if (reason !== undefined && typeof reason !== 'string') {
    throw new InvalidInputError(`${operation}.reason`, 'must be a string');
  }
  if (reason !== undefined && Buffer.byteLength(reason) > MAX_REASON_BYTES) {
    throw new InvalidInputError(`${operation}.reason`, `must be at most ${MAX_REASON_BYTES} bytes`);
  }
  return {
    reason: reason ?? null,
    actor: actorOf(o['actor'], `${operation}.actor`) ?? null,
    ...historyLevels(runtime),
  };
}

/**
 * Holds a live instance (docs/operations-control.md "Hold and release"): HOLD_INSTANCE, one
 * statement, with its `manual.hold` history row. `NoTargetError` for a missing target;
 * `InvalidInputError` for one that has ended.
 */
export async function holdInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<HoldResult> {
  const input = holdInput(runtime, options, 'hold');
  const answer =
    (await HOLD_INSTANCE.run(runtime.sql, { ...idOf(target), ...input })) ??
    (await archivedAnswer(runtime, target));
  if (!answer) throw new NoTargetError(targetLabel(target), 'nothing was held');
  if (!answer.changed) {
    throw new InvalidInputError(
      'hold.target',
      `${answer.fsm}#${answer.id} is ${answer.status}: only a live instance can be held`,
    );
  }
  return { id: answer.id, changed: !answer.wasHeld };
}

/**
 * Releases a held instance (docs/operations-control.md "Hold and release"): RELEASE_INSTANCE,
 * one statement with its `manual.release` history row, then, after commit, the poke of its
 * queue when it is runnable and due. `NoTargetError` for a missing target; a target that is
 * not held answers `changed` false.
 */
export async function releaseInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options?: unknown,
): Promise<HoldResult> {
  const input = holdInput(runtime, options, 'release');
  const answer =
    (await RELEASE_INSTANCE.run(runtime.sql, { ...idOf(target), ...input })) ??
    (await archivedAnswer(runtime, target));
  if (!answer) throw new NoTargetError(targetLabel(target), 'nothing was released');
  if (answer.due) runtime.pokes.poke([answer.queue]);
  return { id: answer.id, changed: answer.changed };
}

/**
 * What HOLD_INSTANCE / RELEASE_INSTANCE answer for an ended row, for an archived instance
 * (docs/archive.md: only ended rows are archived, and those statements read the hot table):
 * unchanged, not held, not due. Null when no instance answers the target at all.
 */
async function archivedAnswer(runtime: ControlRuntime, target: ResolvedTarget) {
  const row = await readResolved(runtime.sql, target);
  if (!row) return null;
  return {
    id: row.id,
    fsm: row.fsm,
    status: row.status,
    queue: row.queue,
    changed: false,
    wasHeld: false,
    due: false,
  };
}
