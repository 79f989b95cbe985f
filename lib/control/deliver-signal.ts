import type { PoolClient } from 'pg';

import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { faultPoint, FAULTS_ENABLED } from '../runtime/fault-points';
import { toJsonText } from '../serialization/json-value';
import { DELIVER_SIGNAL } from '../sql/signal.sql';
import { runCancel } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';
import { resolveTarget, targetLabel } from './target';

/**
 * Delivers a signal (docs/design.md §8.1): validates the name, dedup key, target and payload
 * (`InvalidInputError` naming the field, nothing stored), then one DELIVER_SIGNAL statement —
 * or, for a name in the target FSM's `cancelOn`, the cancel statement (docs/design.md §27.2).
 * `NoTargetError` when no live instance answers. Answers whether the dedup key was already
 * stored (`duplicate`: nothing new was delivered). `connect` gives the caller's transaction
 * client, after the arguments were checked; outside one a delivery that made its row due pokes the queue. Shared by `EngineService.signal`
 * and `GenDurableClient.signal`.
 */
export async function deliverSignal(
  runtime: ControlRuntime,
  target: unknown,
  name: unknown,
  payload: unknown,
  dedupKey: unknown,
  connect?: () => Promise<PoolClient | undefined>,
  /** The sender's W3C trace context, stored on the signal row (docs/design.md §31). */
  traceContext: string | null = null,
): Promise<{ readonly duplicate: boolean }> {
  if (typeof name !== 'string' || name.length === 0) {
    throw new InvalidInputError('signal.name', 'must be a non-empty string');
  }
  if (dedupKey !== undefined && (typeof dedupKey !== 'string' || dedupKey.length === 0)) {
    throw new InvalidInputError('signal.dedupKey', 'must be a non-empty string');
  }
  const to = resolveTarget(target, 'signal.target');
  const payloadText = toJsonText(payload, 'signal.payload', runtime.options.maxStateBytes);
  const byId = 'id' in to;
  const delivery = {
    targetId: byId ? to.id : null,
    correlationKey: byId ? null : to.correlationKey,
    name,
    payloadText,
    dedupKey: dedupKey ?? null,
    traceContext,
  };
  const client = await connect?.();
  const cancelling = runtime.registry.cancellingFsms(name);
  if (cancelling !== null) {
    // docs/design.md §27.2 `cancelOn`: for a target of such an FSM the delivery is a cancel,
    // and nothing is stored; a target of any other FSM (or none) gets the plain delivery.
    const cancelled = await runCancel(
      runtime,
      {
        targetId: delivery.targetId,
        correlationKey: delivery.correlationKey,
        reason: `signal ${name}`,
        children: 'cascade',
        fence: false,
        descendantsOnly: false,
        onlyFsms: cancelling,
      },
      client,
    );
    if (cancelled !== null) {
      if (cancelled.alreadyTerminal.length > 0) throw new NoTargetError(targetLabel(to));
      return { duplicate: false };
    }
  }
  const row = await DELIVER_SIGNAL.run(runtime.sql, delivery, client);
  if (!row) {
    throw new NoTargetError(targetLabel(to));
  }
  if (FAULTS_ENABLED) await faultPoint('signal.afterCommit', { ids: [row.id] });
  if (row.status === 'runnable' && row.due && client === undefined) {
    runtime.pokes.poke([row.queue]);
  }
  return { duplicate: !row.inserted };
}
