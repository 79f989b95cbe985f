import type { Limiter, LimitClosure } from '../limiter/limiter.interface';
import type { Telemetry } from '../telemetry/telemetry';
import type { FlushEffects } from './flush-write';

/**
 * After a flush committed (docs/design.md §16.5): the limits its `throttle` entries close, in
 * one limiter call, then one `limit:throttled` per closed limit. Entries a cancel ended close
 * nothing. Never throws nor waits (the limiter logs its own failures); nothing to close, nothing runs.
 */
export function closeThrottledLimits(
  effects: FlushEffects,
  limiter: Limiter,
  telemetry: Telemetry,
): void {
  let closures: LimitClosure[] | undefined;
  const rows: { id: string; fsm: string; step: string; queue: string }[] = [];
  for (const e of effects.committed) {
    if (e.kind !== 'throttle' || e.closes === undefined || e.closes.length === 0) continue;
    if (effects.cancelledIds.includes(e.id)) continue;
    for (const c of e.closes) {
      (closures ??= []).push(c);
      rows.push({ id: e.id, fsm: e.fsm, step: e.step, queue: e.queue });
    }
  }
  if (closures === undefined) return;
  const closed = closures;
  void limiter.throttle(closed).then(() => {
    closed.forEach((c, i) => {
      const row = rows[i]!;
      telemetry.emit(
        'limit:throttled',
        { retryAfterMs: c.ms },
        { ...row, kind: c.kind, key: c.key },
      );
    });
  });
}
