import type { SqlExecutor } from '../db/sql-executor';
import { DrainTimeoutError } from '../errors/drain-timeout.error';
import { CLEAR_STEP_STARTED, MARK_STEP_STARTED } from '../sql/lease.sql';
import type { ClaimedRow } from './claimed-row';
import type { ExecuteOptions, ExecutionResult, Executor } from './executor';
import type { Task } from './step-slots';

/** What a scheduler hears of a row it launched. */
export interface LaunchListener {
  /** The row runs no more steps; its last outcome went to the flusher (its slot is free). */
  stepsDone(id: string): void;
  /** A step ran past its timeout; its promise keeps a slot until `settled` (docs/design.md §27.5). */
  abandoned(settled: Promise<void>): void;
  /** The executor is done with the row: its flush answered (`kind`), or the crash path (null). */
  completed(id: string, kind: ExecutionResult['kind']): void;
}

/**
 * Starts a claimed row's steps on the executor for a scheduler, with the poison-pill marks of
 * a row that has already lost a worker (docs/reliability.md, finding F-R11): MARK_STEP_STARTED
 * commits before its step runs, CLEAR_STEP_STARTED goes beside the flush once it returned.
 * Shared by every scheduler of a node.
 */
export class StepLauncher {
  constructor(
    private readonly sql: SqlExecutor,
    private readonly executor: Executor,
  ) {}

  /**
   * Runs `row`'s steps; `chain` is asked before each inline hand-off (docs/design.md §7).
   * Answers the task the scheduler holds until `listener.completed`.
   */
  launch(row: ClaimedRow, chain: () => boolean, listener: LaunchListener): Task {
    const startedAt = performance.now();
    return new LaunchedTask(row, startedAt, this.run(row, chain, listener));
  }

  /**
   * The row's steps, then `listener.completed`. One async function rather than a chain of
   * `.then`s: the drain runs it once per step, and each link was a promise and a closure.
   */
  private async run(
    row: ClaimedRow,
    chain: () => boolean,
    listener: LaunchListener,
  ): Promise<void> {
    const id = row.id;
    let kind: ExecutionResult['kind'];
    try {
      // The step starts on a later microtask, as before: never inside the scheduler's dispatch.
      if (row.reaps === 0) await Promise.resolve();
      else await this.stepStarting(row);
      const result = await this.executor.execute(
        row,
        new LaunchOptions(this, row, chain, listener),
      );
      kind = result.kind;
    } catch {
      kind = null;
    }
    listener.completed(id, kind);
  }

  /**
   * `drainTimeout` ran out (docs/design.md §27.5): the steps of `rows` still running get their
   * `ctx.signal` aborted with a `DrainTimeoutError`; the node stops waiting for them, and their
   * rows stay executing for the reaper (or this node's successor) to run again.
   */
  abortOnDrainTimeout(rows: readonly ClaimedRow[], drainTimeoutMs: number): void {
    for (const row of rows) {
      this.executor.running.abortStep(
        row.id,
        row.claimSeq,
        (r) => new DrainTimeoutError(r.fsm, r.id, r.step, drainTimeoutMs),
      );
    }
  }

  /**
   * Before the step of a row that has already lost a worker, records that it starts under this
   * claim (committed before the step runs): a loss from now on happened while the step ran and
   * counts toward the poison-pill cap; a loss while it sat in the buffer does not. Rows that
   * never lost a worker skip it. A failed mark is not fatal: the step runs, and a loss during
   * it goes uncounted this once.
   */
  private async stepStarting(row: ClaimedRow): Promise<void> {
    if (row.reaps === 0) return;
    await MARK_STEP_STARTED.run(this.sql, { worker: row.worker, row }).catch(() => undefined);
  }

  /**
   * The step of a row that has already lost a worker returned: its mark is cleared, so a loss
   * while its outcome waits for the commit does not count. Best-effort: a failed clear leaves
   * the loss counted.
   */
  stepReturned(row: ClaimedRow): void {
    if (row.reaps === 0) return;
    void CLEAR_STEP_STARTED.run(this.sql, { worker: row.worker, row }).catch(() => undefined);
  }
}

/*
 * A launched row's task and its execute options are class instances, not object literals: they
 * live until the row's flush answers, long enough that V8's allocation-site pretenuring
 * sometimes moved a literal's allocations straight to the old generation for the rest of a
 * drain (docs/performance.md "Allocation per step"); a class instance carries no allocation
 * site.
 */

class LaunchedTask implements Task {
  awaitingCommit = false;
  keyCounted = false;

  constructor(
    readonly row: ClaimedRow,
    readonly startedAt: number,
    readonly done: Promise<void>,
  ) {}
}

/** What the executor is told of a launched row: its chain test and the listener's calls. */
class LaunchOptions implements ExecuteOptions {
  constructor(
    private readonly launcher: StepLauncher,
    private readonly row: ClaimedRow,
    readonly chain: () => boolean,
    private readonly listener: LaunchListener,
  ) {}

  onStepsDone(): void {
    this.launcher.stepReturned(this.row);
    this.listener.stepsDone(this.row.id);
  }

  onAbandoned(settled: Promise<void>): void {
    this.listener.abandoned(settled);
  }
}
