// A child process for test/chaos/fault-points.spec.ts: hits fault points on command, so the
// spec can check env pre-arming, IPC control and the exit action across a real process.
import { faultPoint, FAULTS_ENABLED, type FaultPointName } from '../../../lib/runtime/fault-points';

process.on('message', (message: unknown) => {
  const m = message as { type?: string; point?: FaultPointName; id?: string };
  if (m.type !== 'hit' || !m.point) return;
  void faultPoint(m.point, { ids: m.id ? [m.id] : [] }).then(
    (result) => process.send?.({ type: 'passed', point: m.point, result: result ?? null }),
    (err: unknown) =>
      process.send?.({
        type: 'threw',
        point: m.point,
        code: (err as { code?: string }).code ?? null,
      }),
  );
});
// The registry unrefs the IPC channel (it must not keep an engine process alive); this child
// has nothing else to live for, so it holds the channel itself.
process.channel?.ref();
process.send?.({ type: 'ready', enabled: FAULTS_ENABLED });
