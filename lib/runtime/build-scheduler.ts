import type { SqlExecutor } from '../db/sql-executor';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import { ClaimBuffer } from './claim-buffer';
import { ClaimFloor } from './claim-floor';
import type { Executor } from './executor';
import { LeaseKeeper } from './lease-keeper';
import type { Picker } from './picker';
import { PrefetchPolicy } from './prefetch-policy';
import { QueuePause } from './queue-pause';
import { Scheduler } from './scheduler';
import type { SoloRun } from './solo-run';
import { StepSlots } from './step-slots';
import type { StepLauncher } from './step-launcher';
import { SuspectHold } from './suspect-hold';

/** What every scheduler of a node shares. */
export interface SchedulerShared {
  readonly sql: SqlExecutor;
  readonly options: ResolvedOptions;
  readonly executor: Executor;
  /** Starts rows' steps on the executor (one per node). */
  readonly launcher: StepLauncher;
  readonly picker: Picker;
  readonly telemetry: Telemetry;
  /** The node's solo run of poison-pill suspects (docs/design.md §26.5). */
  readonly solo: SoloRun;
  /** The node holds its liveness lock: every earlier process with its nodeId is gone (§17.3). */
  readonly predecessorGone: () => boolean;
  /** Rows went back to runnable while the node runs: poke their queue for other nodes. */
  readonly onReleased: (queue: string) => void;
}

/** Builds one queue's scheduler with its collaborators (docs/design.md §5). */
export function buildScheduler(
  shared: SchedulerShared,
  queue: string,
  concurrency: number,
): Scheduler {
  const { sql, options, executor, picker, telemetry } = shared;
  const lease = new LeaseKeeper(
    sql,
    options,
    queue,
    executor.running,
    picker,
    telemetry,
    shared.predecessorGone,
  );
  const prefetch = new PrefetchPolicy(
    options.prefetch,
    options.minDemand,
    concurrency,
    options.newKeySlots,
  );
  const floor = new ClaimFloor();
  const buffer = new ClaimBuffer(
    queue,
    (rows) => picker.release(lease.workerId, rows, floor),
    telemetry,
    shared.onReleased,
    () => lease.workerId,
  );
  return new Scheduler({
    ...shared,
    queue,
    lease,
    prefetch,
    buffer,
    floor,
    slots: new StepSlots(concurrency, 2 * concurrency + prefetch.max()),
    suspects: new SuspectHold(shared.solo, telemetry),
    pause: new QueuePause(sql, telemetry, { queue, worker: lease.workerId }),
  });
}
