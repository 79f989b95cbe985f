import type { ThrottleReport } from '../limiter/limiter.interface';
import type { Telemetry } from '../telemetry/telemetry';

/**
 * Reports the keys of one admission that granted fewer than asked (docs/design.md §20):
 * `concurrency:throttled` per gate, `rate_limit:throttled` per bucket. Shared by the pick's
 * admission and the inline hand-off's.
 */
export function emitThrottled(
  telemetry: Telemetry,
  throttled: readonly ThrottleReport[],
  queue: string,
): void {
  for (const t of throttled) {
    if (t.kind === 'conc') {
      telemetry.emit(
        'concurrency:throttled',
        { wanted: t.wanted, admitted: t.granted },
        { key: t.key, queue },
      );
    } else {
      telemetry.emit(
        'rate_limit:throttled',
        { wanted: t.wanted, granted: t.granted },
        { key: t.key, queue },
      );
    }
  }
}
