import type { FaultBudget } from './nemesis';
import type { Workload } from './protocol';

/** A chaos profile (docs/reliability.md §3.5). Timings are the test timings of §3.5 (lease 2 s). */
export interface Profile {
  readonly name: string;
  readonly title: string;
  readonly workers: number;
  readonly concurrency: number;
  readonly childConcurrency: number;
  /** Queue `tx` per worker: chaos_tx's transactional steps, each holding a pooled connection. */
  readonly txConcurrency: number;
  /** The fault-free control phase before the faults (its re-executions must be 0). */
  readonly control: Workload;
  readonly workload: Workload;
  readonly feedMs: number;
  readonly faultStartMs: number;
  readonly faultEndMs: number;
  /** After healing: how long the drain may take before the run fails. */
  readonly drainMs: number;
  readonly budget: FaultBudget;
  readonly redis: boolean;
  readonly gcRetentionMs: number;
  readonly statementTimeoutMs: number;
}

const CONTROL: Workload = {
  linear: 80,
  keyed: 20,
  hotKeys: 2,
  retrier: 20,
  parker: 60,
  fanout: 3,
  tree: 0,
  spinner: 0,
  pill: 0,
  transactional: 20,
  duplicateShare: 0.2,
  lateSignals: 5,
  failer: 0,
  cancelShare: 0,
  treeCancelShare: 0,
  fenceShare: 0,
  retryShare: 0,
  cancelDelayMs: 0,
};

/** Cancels and retries in the chaos phase (issue 17): both modes, cascading trees, retries. */
const CHAOS_ACTIONS = {
  failer: 20,
  cancelShare: 0.1,
  treeCancelShare: 0.5,
  fenceShare: 0.5,
  retryShare: 0.5,
  cancelDelayMs: 2_500,
} as const;

/** R1's fault budget, shared by T1 (the same catalogue over transactional steps). */
const R1_FAULTS: FaultBudget = {
  sigkill: 15,
  sigstop: 5,
  backendKill: 20,
  pgImmediate: 1,
  pgFast: 0,
  blackhole: 1,
  redisKill: 1,
  flushExit: 2,
  pgOutage: 0,
  linkReset: 5,
  flushBlackhole: 1,
  pgBlip: 1,
};

export const PROFILES: Record<string, Profile> = {
  /** A short run for working on the harness itself (not a reliability claim). */
  dev: {
    name: 'dev',
    title: 'dev chaos run',
    workers: 3,
    concurrency: 6,
    childConcurrency: 3,
    txConcurrency: 2,
    control: {
      ...CONTROL,
      linear: 20,
      keyed: 10,
      retrier: 5,
      parker: 20,
      fanout: 1,
      lateSignals: 2,
    },
    workload: {
      linear: 100,
      keyed: 40,
      hotKeys: 3,
      retrier: 30,
      parker: 80,
      fanout: 5,
      tree: 1,
      spinner: 1,
      pill: 1,
      transactional: 30,
      duplicateShare: 0.2,
      lateSignals: 5,
      ...CHAOS_ACTIONS,
      failer: 5,
    },
    feedMs: 20_000,
    faultStartMs: 2_000,
    faultEndMs: 22_000,
    drainMs: 45_000,
    budget: {
      sigkill: 3,
      sigstop: 1,
      backendKill: 5,
      pgImmediate: 1,
      pgFast: 0,
      blackhole: 1,
      redisKill: 1,
      flushExit: 2,
      pgOutage: 0,
      linkReset: 3,
      flushBlackhole: 1,
      pgBlip: 1,
    },
    redis: true,
    gcRetentionMs: 10_000,
    statementTimeoutMs: 3_000,
  },
  R1: {
    name: 'R1',
    title: 'R1 chaos smoke',
    workers: 3,
    concurrency: 6,
    childConcurrency: 3,
    txConcurrency: 2,
    control: CONTROL,
    workload: {
      linear: 500,
      keyed: 200,
      hotKeys: 5,
      retrier: 150,
      parker: 400,
      fanout: 30,
      tree: 3,
      spinner: 2,
      pill: 1,
      transactional: 150,
      duplicateShare: 0.2,
      lateSignals: 20,
      ...CHAOS_ACTIONS,
    },
    feedMs: 70_000,
    faultStartMs: 3_000,
    faultEndMs: 75_000,
    drainMs: 60_000,
    budget: R1_FAULTS,
    redis: true,
    gcRetentionMs: 45_000,
    statementTimeoutMs: 3_000,
  },
  /**
   * Transactional steps under the fault catalogue (issue: exactly-once database effects): the
   * R1 faults over a workload of mostly chaos_tx instances, ≥ 18 000 transactional steps in one
   * run; I-TX-EFFECTS holds their database effects to the committed transitions.
   */
  T1: {
    name: 'T1',
    title: 'T1 transactional chaos',
    workers: 3,
    concurrency: 4,
    childConcurrency: 2,
    txConcurrency: 6,
    control: CONTROL,
    workload: {
      linear: 100,
      keyed: 40,
      hotKeys: 5,
      retrier: 30,
      parker: 80,
      fanout: 5,
      tree: 1,
      spinner: 1,
      pill: 1,
      transactional: 6_300,
      duplicateShare: 0.2,
      lateSignals: 10,
      ...CHAOS_ACTIONS,
    },
    feedMs: 90_000,
    faultStartMs: 3_000,
    faultEndMs: 95_000,
    drainMs: 300_000,
    budget: R1_FAULTS,
    redis: true,
    gcRetentionMs: 45_000,
    statementTimeoutMs: 3_000,
  },
  R2: {
    name: 'R2',
    title: 'R2 soak',
    workers: 3,
    concurrency: 8,
    childConcurrency: 4,
    txConcurrency: 2,
    control: CONTROL,
    workload: {
      linear: 12_000,
      keyed: 3_000,
      hotKeys: 20,
      retrier: 3_000,
      parker: 6_000,
      fanout: 300,
      tree: 10,
      spinner: 20,
      pill: 3,
      transactional: 3_000,
      duplicateShare: 0.2,
      lateSignals: 200,
      ...CHAOS_ACTIONS,
      failer: 400,
    },
    feedMs: 30 * 60_000,
    faultStartMs: 10_000,
    faultEndMs: 31 * 60_000,
    drainMs: 5 * 60_000,
    budget: {
      sigkill: 300,
      sigstop: 60,
      backendKill: 200,
      pgImmediate: 10,
      pgFast: 10,
      blackhole: 20,
      redisKill: 10,
      flushExit: 20,
      pgOutage: 2,
      linkReset: 60,
      flushBlackhole: 10,
      pgBlip: 5,
    },
    redis: true,
    gcRetentionMs: 60_000,
    statementTimeoutMs: 3_000,
  },
};
