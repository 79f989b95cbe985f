import type { AdmitResult, LimiterSlot, ThrottleReport } from './limiter.interface';

/**
 * Builds a limiter's `AdmitResult` entry by entry: admitted rows with their slots, denied
 * ids, and a per-key tally of wanted vs granted at the gate and at the bucket, reported for
 * the keys that granted less than wanted (`concurrency:throttled`, `rate_limit:throttled`).
 * Shared by the PostgreSQL and Redis backends.
 */
export class AdmitVerdicts {
  private readonly admitted: { id: string; slot: LimiterSlot | null }[] = [];
  private readonly denied: string[] = [];
  private readonly gates = new Map<string, { wanted: number; granted: number }>();
  private readonly rates = new Map<string, { wanted: number; granted: number }>();

  /** Counts one entry at its gate key. */
  gate(key: string, granted: boolean): void {
    AdmitVerdicts.tally(this.gates, key, granted);
  }

  /** Counts one entry (that passed its gate) at its rate key. */
  rate(key: string, granted: boolean): void {
    AdmitVerdicts.tally(this.rates, key, granted);
  }

  admit(id: string, slot: LimiterSlot | null): void {
    this.admitted.push({ id, slot });
  }

  deny(id: string): void {
    this.denied.push(id);
  }

  result(): AdmitResult {
    const throttled: ThrottleReport[] = [];
    for (const [key, t] of this.gates) {
      if (t.granted < t.wanted) throttled.push({ kind: 'conc', key, ...t });
    }
    for (const [key, t] of this.rates) {
      if (t.granted < t.wanted) throttled.push({ kind: 'rate', key, ...t });
    }
    return { admitted: this.admitted, denied: this.denied, throttled };
  }

  private static tally(
    map: Map<string, { wanted: number; granted: number }>,
    key: string,
    granted: boolean,
  ): void {
    const t = map.get(key) ?? { wanted: 0, granted: 0 };
    t.wanted += 1;
    if (granted) t.granted += 1;
    map.set(key, t);
  }
}
