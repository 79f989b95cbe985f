import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { HOLD_INSTANCE, RELEASE_INSTANCE } from '../sql/hold.sql';
import type { ControlRuntime } from './control-runtime';
import type { HoldResult } from './hold-options';
import { optionsObject } from './input-checks';
import { type ResolvedTarget, targetLabel } from './target';

const MAX_REASON_BYTES = 8 * 1024;

function idOf(target: ResolvedTarget): { id: string | null; correlationKey: string | null } {
  return 'id' in target
    ? { id: target.id, correlationKey: null }
    : { id: null, correlationKey: target.correlationKey };
}

/**
 * Holds a live instance (docs/operations-control.md "Hold and release"): HOLD_INSTANCE, one
 * statement. `NoTargetError` for a missing target; `InvalidInputError` for one that has ended.
 */
export async function holdInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
  options: unknown,
): Promise<HoldResult> {
  const o = optionsObject(options, ['reason'], 'hold.options') ?? {};
  const reason = o['reason'];
  if (reason !== undefined && typeof reason !== 'string') {
    throw new InvalidInputError('hold.reason', 'must be a string');
  }
  if (reason !== undefined && Buffer.byteLength(reason) > MAX_REASON_BYTES) {
    throw new InvalidInputError('hold.reason', `must be at most ${MAX_REASON_BYTES} bytes`);
  }
  const answer = await HOLD_INSTANCE.run(runtime.sql, { ...idOf(target), reason: reason ?? null });
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
 * one statement, then, after commit, the poke of its queue when it is runnable and due.
 * `NoTargetError` for a missing target; a target that is not held answers `changed` false.
 */
export async function releaseInstance(
  runtime: ControlRuntime,
  target: ResolvedTarget,
): Promise<HoldResult> {
  const answer = await RELEASE_INSTANCE.run(runtime.sql, idOf(target));
  if (!answer) throw new NoTargetError(targetLabel(target), 'nothing was released');
  if (answer.due) runtime.pokes.poke([answer.queue]);
  return { id: answer.id, changed: answer.changed };
}
