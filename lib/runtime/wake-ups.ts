/** Due times closer than this share one wake-up, ms. */
const GRANULARITY_MS = 5;
/** Most pending wake-ups per queue; a later due time beyond them is left to the poll. */
const MAX_PER_QUEUE = 1_000;
/** Margin after the due time, ms: a timer may fire a millisecond early. */
const MARGIN_MS = 2;

interface QueueWakeUps {
  /** Pending due times (local ms clock), ascending, distinct. */
  readonly dues: number[];
  timer: NodeJS.Timeout | undefined;
  /** The due time the timer is armed for. */
  armedFor: number;
}

/**
 * Local wake-ups for rows this node made runnable later (docs/design.md §27.4): a retry
 * backoff, a `scheduleIn`, later a `sleep`. When the node that commits such a row knows its
 * delay, it arms a timer for the due time (if it is within `horizonMs`, which the engine sets
 * to `maxPollInterval × 10`) and then wakes the queue as a due commit would, so a 200 ms backoff
 * runs about 200 ms later instead of at the next idle poll. Beyond the horizon, after a restart,
 * or on another node, the poll finds the row: a wake-up is a hint, never the only way.
 * One timer per queue (the earliest due time); timers never keep the process alive.
 */
export class WakeUps {
  private readonly queues = new Map<string, QueueWakeUps>();
  private closed = false;

  constructor(
    private readonly horizonMs: number,
    private readonly wake: (queue: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** Arms a wake-up of `queue` in `delayMs`; false when it is not armed (0, beyond the horizon, closed). */
  arm(queue: string, delayMs: number): boolean {
    if (this.closed || !(delayMs > 0) || delayMs > this.horizonMs) return false;
    const due = Math.ceil((this.now() + delayMs + MARGIN_MS) / GRANULARITY_MS) * GRANULARITY_MS;
    let q = this.queues.get(queue);
    if (!q) {
      q = { dues: [], timer: undefined, armedFor: Infinity };
      this.queues.set(queue, q);
    }
    const at = insertionPoint(q.dues, due);
    if (q.dues[at] === due) return true;
    if (q.dues.length >= MAX_PER_QUEUE) {
      if (at >= MAX_PER_QUEUE) return false;
      q.dues.pop();
    }
    q.dues.splice(at, 0, due);
    this.schedule(queue, q);
    return true;
  }

  /** Pending wake-ups of `queue` (for tests and diagnostics). */
  pending(queue: string): number {
    return this.queues.get(queue)?.dues.length ?? 0;
  }

  close(): void {
    this.closed = true;
    for (const q of this.queues.values()) if (q.timer) clearTimeout(q.timer);
    this.queues.clear();
  }

  private schedule(queue: string, q: QueueWakeUps): void {
    const first = q.dues[0];
    if (first === undefined || first === q.armedFor) return;
    if (q.timer) clearTimeout(q.timer);
    q.armedFor = first;
    q.timer = setTimeout(() => this.fire(queue, q), Math.max(0, first - this.now()));
    q.timer.unref();
  }

  private fire(queue: string, q: QueueWakeUps): void {
    q.timer = undefined;
    q.armedFor = Infinity;
    if (this.closed) return;
    const now = this.now();
    let passed = 0;
    while (passed < q.dues.length && (q.dues[passed] as number) <= now) passed++;
    // A timer that fired early finds nothing due: it re-arms for the same time.
    if (passed > 0) {
      q.dues.splice(0, passed);
      this.wake(queue);
    }
    if (q.dues.length === 0) this.queues.delete(queue);
    else this.schedule(queue, q);
  }
}

/** First index whose value is ≥ `value` (binary search). */
function insertionPoint(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
