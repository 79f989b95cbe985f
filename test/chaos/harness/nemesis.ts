import { uniform } from './random';

/** The fault kinds the nemesis injects (docs/reliability.md §3.3). */
export type FaultKind =
  | 'sigkill'
  | 'sigstop'
  | 'backend-kill'
  | 'pg-immediate'
  | 'pg-fast'
  | 'pg-outage'
  | 'blackhole'
  | 'redis-kill'
  | 'flush-exit'
  | 'link-reset'
  | 'flush-blackhole'
  | 'pg-blip';

export interface PlannedFault {
  /** ms after the fault phase starts. */
  readonly at: number;
  readonly kind: FaultKind;
  /** Pause/outage length, or restart delay for a SIGKILL, in ms. */
  readonly holdMs: number;
}

export interface FaultBudget {
  readonly sigkill: number;
  readonly sigstop: number;
  readonly backendKill: number;
  readonly pgImmediate: number;
  readonly pgFast: number;
  readonly blackhole: number;
  readonly redisKill: number;
  /** S02: a worker dies (exit 137 at a fault point) just before or just after a flush commits. */
  readonly flushExit: number;
  /** S14: Postgres stopped (fast) for 2 × the lease, then started. */
  readonly pgOutage: number;
  /**
   * A worker's link reset right after the server answered a flush's COMMIT (or its solo
   * UPDATE): the outcome committed, the worker sees ECONNRESET (finding F-R8). Its invariant:
   * no execution lost to it (such re-executions are not explained, I-REEXEC-EXPLAINED).
   */
  readonly linkReset: number;
  /**
   * A worker's link goes dark right after it sent a statement inside a flush transaction
   * (row locks held on the server; finding F-R9), for 4–6 s. Its invariant: the other workers'
   * executions are not lost to it (only the dark worker's own are explained).
   */
  readonly flushBlackhole: number;
  /**
   * Postgres stopped (fast) and started again at once: an outage shorter than the lease
   * (finding F-R10). Acknowledged writes survive; at the test lease (2 s) the stop and start
   * outlast the flush retry window (lease / 2), so its re-executions are explained.
   */
  readonly pgBlip: number;
}

/**
 * A seeded schedule: each kind's faults spread uniformly over `[startMs, endMs)`, one fault
 * per kind-slot so they never bunch up entirely; Postgres restarts away from the edges.
 * Victims are chosen when the fault fires (among the workers that are up), from the same PRNG.
 */
export function planFaults(
  random: () => number,
  budget: FaultBudget,
  startMs: number,
  endMs: number,
  leaseMs: number,
): PlannedFault[] {
  const out: PlannedFault[] = [];
  const spread = (
    n: number,
    kind: FaultKind,
    hold: () => number,
    lo = startMs,
    hi = endMs,
  ): void => {
    const slot = (hi - lo) / Math.max(n, 1);
    for (let i = 0; i < n; i++) {
      out.push({
        at: Math.floor(lo + slot * i + random() * slot),
        kind,
        holdMs: Math.floor(hold()),
      });
    }
  };
  spread(budget.sigkill, 'sigkill', () => uniform(random, 0, 3_000));
  spread(budget.sigstop, 'sigstop', () => leaseMs * uniform(random, 1.5, 3));
  spread(budget.backendKill, 'backend-kill', () => 0);
  const middle = [startMs + (endMs - startMs) * 0.3, startMs + (endMs - startMs) * 0.8] as const;
  spread(budget.pgImmediate, 'pg-immediate', () => 0, ...middle);
  spread(budget.pgFast, 'pg-fast', () => 0, ...middle);
  spread(budget.blackhole, 'blackhole', () => uniform(random, 4_000, 6_000));
  spread(budget.redisKill, 'redis-kill', () => uniform(random, 5_000, 10_000));
  spread(budget.flushExit, 'flush-exit', () => uniform(random, 0, 3_000));
  spread(budget.pgOutage, 'pg-outage', () => 2 * leaseMs, ...middle);
  spread(budget.linkReset, 'link-reset', () => 0);
  spread(budget.flushBlackhole, 'flush-blackhole', () => uniform(random, 4_000, 6_000));
  spread(budget.pgBlip, 'pg-blip', () => 0, ...middle);
  return out.sort((a, b) => a.at - b.at);
}
