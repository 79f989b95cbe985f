import type { ResolvedOptions } from '../options/resolved-options';
import type { ClaimedRow } from './claimed-row';

/**
 * `prefetch: 'auto'`: a queue whose recent steps average under this many ms prefetches (its
 * claim latency is then a large share of a step); one of longer steps does not (prefetched rows
 * would wait behind them, hidden from other nodes, for nothing).
 */
const AUTO_PREFETCH_STEP_MS = 50;
/** `prefetch: 'auto'` while steps are short: running + prefetched = max(200, 4 × concurrency). */
const AUTO_CAPACITY_MIN = 200;
const AUTO_CAPACITY_PER_SLOT = 4;
/**
 * `prefetch: 'auto'` while steps average under this many ms (trivial steps): running +
 * prefetched = max(800, 4 × concurrency). The claim round trip is then most of a row's cost,
 * and a buffer of 800 such steps is at most 800 × 2 ms / concurrency of work (160 ms at 10 slots).
 */
const AUTO_FAST_STEP_MS = 2;
const AUTO_FAST_CAPACITY_MIN = 800;
/**
 * A fair queue keeps this share of its prefetch (at most `concurrency` rows) out of its refills,
 * for claims started by pokes (docs/many-tenants.md "Prefetch on a fair queue").
 */
const POKE_RESERVE_SHARE = 4;
/**
 * `newKeySlots: 'auto'`: a fair queue of at least this concurrency keeps one running slot for
 * rows whose key has no step running (a lone busy key then has at least 90 % of the slots).
 */
const AUTO_NEW_KEY_SLOT_FROM = 10;
/** Weight of the newest step in the moving average of step durations. */
const STEP_AVERAGE_WEIGHT = 0.2;

/**
 * How many rows one queue's scheduler claims beyond its running slots (docs/operations.md,
 * "prefetch"), and the least demand worth a claim. With `'auto'` both follow a moving average
 * of the queue's step durations, which the scheduler feeds as its steps return.
 */
export class PrefetchPolicy {
  /** Moving average of this queue's step durations, ms (dispatch → last outcome handed over). */
  private stepMs: number | undefined;

  constructor(
    private readonly option: ResolvedOptions['prefetch'],
    private readonly minDemandOption: ResolvedOptions['minDemand'],
    private readonly concurrency: number,
    private readonly newKeySlotsOption: ResolvedOptions['newKeySlots'] = 0,
  ) {}

  /** A row's steps took `ms` from dispatch to its last outcome handed over. */
  recordStep(ms: number): void {
    this.stepMs =
      this.stepMs === undefined ? ms : this.stepMs + (ms - this.stepMs) * STEP_AVERAGE_WEIGHT;
  }

  /**
   * The prefetch now: the option, or with `'auto'` running + prefetched = max(800, 4 ×
   * concurrency) while steps average under 2 ms, max(200, 4 × concurrency) while they average
   * under 50 ms, else 0. One claim is in flight at a time, so a queue of short steps drains at
   * most a capacity per claim round trip (its execution plus its commit's WAL flush): the
   * shorter the steps, the more rows that round trip must bring to keep the slots busy
   * (docs/performance.md, "Profiles").
   */
  prefetch(): number {
    if (this.option !== 'auto') return this.option;
    if (this.stepMs === undefined || this.stepMs >= AUTO_PREFETCH_STEP_MS) return 0;
    return this.autoPrefetch(
      this.stepMs < AUTO_FAST_STEP_MS ? AUTO_FAST_CAPACITY_MIN : AUTO_CAPACITY_MIN,
    );
  }

  /** The largest prefetch the option allows (with `'auto'`, that of trivial steps). */
  max(): number {
    return this.option === 'auto' ? this.autoPrefetch(AUTO_FAST_CAPACITY_MIN) : this.option;
  }

  /**
   * The minDemand now: the option, or with `'auto'` half the capacity while prefetching (a
   * refill then starts while half the buffer is still to run, and claims stay large), else 1.
   */
  minDemand(): number {
    if (this.minDemandOption !== 'auto') return this.minDemandOption;
    const prefetch = this.prefetch();
    return prefetch === 0 ? 1 : Math.ceil((this.concurrency + prefetch) / 2);
  }

  /**
   * `'auto'` stops prefetching once the queue's steps average 50 ms or more; rows it already
   * prefetched would then wait behind whole steps, hidden from other nodes: once every slot is
   * running (`inFlight` of `concurrency`), the `buffered` rows are to be released. Only long
   * steps shed: rows claimed while steps were trivial stay buffered when steps merely turn short
   * (2–50 ms; no claim is made until the buffer is under the new capacity), so a queue whose
   * average hovers near 2 ms does not release and re-claim rows.
   */
  shouldShed(inFlight: number, buffered: number): boolean {
    if (this.option !== 'auto' || inFlight < this.concurrency) return false;
    return this.prefetch() === 0 && buffered > 0;
  }

  /**
   * On a fair queue, the rows its refills leave unclaimed so that a poke (a new row, perhaps of a
   * key with nothing buffered) claims at once instead of waiting for the buffer to drain to
   * `minDemand`: a quarter of the prefetch now, at most `concurrency`, 0 without prefetch
   * (docs/many-tenants.md "Prefetch on a fair queue").
   */
  pokeReserve(): number {
    return Math.min(this.concurrency, Math.ceil(this.prefetch() / POKE_RESERVE_SHARE));
  }

  /**
   * On a fair queue, the running slots kept for rows whose fairness key has no step running
   * (docs/many-tenants.md "A slot for new keys"): the option (at most `concurrency` − 1), or
   * with `'auto'` 1 from concurrency 10, else 0; 0 without prefetch. Rows of keys already
   * running fill the other slots, so a new key's row finds a slot free instead of waiting for
   * a running step to end.
   */
  newKeySlots(): number {
    if (this.prefetch() === 0) return 0;
    const option = this.newKeySlotsOption;
    if (option === 'auto') return this.concurrency >= AUTO_NEW_KEY_SLOT_FROM ? 1 : 0;
    return Math.min(option, this.concurrency - 1);
  }

  /** `'auto'`'s prefetch for a capacity floor: running + prefetched = max(floor, 4 × concurrency). */
  private autoPrefetch(floor: number): number {
    return Math.max(floor, AUTO_CAPACITY_PER_SLOT * this.concurrency) - this.concurrency;
  }
}

/**
 * A fair queue's buffer after `rows` join it (docs/many-tenants.md "Prefetch on a fair queue"):
 * keys take turns. A row's round is the number of rows of its key (null is one key) ahead of it;
 * the buffer runs by round, and within a round in its present order, new rows after buffered
 * ones. A key with nothing buffered therefore starts after at most one row of each other key,
 * however many rows of one key the prefetch holds. A buffer already in this order keeps it;
 * weights are the claim's business (each claim already took rows in weighted fair order).
 */
export function orderFairly(
  buffer: readonly ClaimedRow[],
  rows: readonly ClaimedRow[],
): ClaimedRow[] {
  const all = buffer.concat(rows);
  const seen = new Map<string | null, number>();
  const rounds = all.map((r) => {
    const key = r.fairnessKey ?? null;
    const n = seen.get(key) ?? 0;
    seen.set(key, n + 1);
    return n;
  });
  const order = all.map((_, i) => i);
  order.sort((a, b) => rounds[a]! - rounds[b]! || a - b);
  return order.map((i) => all[i]!);
}
