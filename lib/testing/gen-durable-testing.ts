import { AssertionError, deepStrictEqual } from 'node:assert';
import { randomBytes } from 'node:crypto';

import type { EngineService } from '../engine/engine.service';
import { resolveTarget, type Target, targetLabel } from '../control/target';
import type { InstanceView } from '../instance/instance-view';
import { MaxStepsExceededError } from '../errors/max-steps-exceeded.error';
import type { DurableStatus } from '../gen-durable.constants';
import {
  TESTING_DUE_QUEUES,
  TESTING_FIRE_ALL_DEADLINES,
  TESTING_LATEST_BY_KEY,
  TESTING_PULL_SCHEDULED,
  TESTING_RESET,
} from '../sql/testing.sql';
import { HEARTBEAT, type HeldClaim } from '../sql/lease.sql';
import { type DrainTally, emptyTally } from './drain-tally';

export interface DrainOptions {
  /** Only this queue. Default: every queue with due rows. */
  queue?: string;
  /**
   * Pull future `eligible_at` (insert delays, retry backoffs, `sleep`s) to now, so they run in
   * this drain. `false` leaves them runnable later. Default true.
   */
  withScheduled?: boolean;
  /** Steps at most before `MaxStepsExceededError`. Default 1000. */
  maxSteps?: number;
}

const PICK_BATCH = 100;

/**
 * Drives an engine inline in host-app tests (docs/design.md §23): run the module as a web node
 * (`queues: {}`, `reaper: false`, `gc: false`, `poke: 'none'`) and call `drain()`. Execution goes
 * through the production claim/enrich SQL and executor; each step's outcome is flushed before
 * the next runs.
 */
export class GenDurableTesting {
  private constructor(private readonly engine: EngineService) {}

  static forEngine(engine: EngineService): GenDurableTesting {
    return new GenDurableTesting(engine);
  }

  /** Runs due rows until nothing is due; returns the tally by outcome kind. */
  async drain(options: DrainOptions = {}): Promise<DrainTally> {
    const runtime = this.engine.runtime;
    const withScheduled = options.withScheduled ?? true;
    const maxSteps = options.maxSteps ?? 1000;
    const queue = options.queue ?? null;
    const worker = `inline-${randomBytes(4).toString('hex')}`;
    const tally = emptyTally();
    for (;;) {
      if (withScheduled) await TESTING_PULL_SCHEDULED.run(runtime.sql, { queue });
      const queues = await TESTING_DUE_QUEUES.run(runtime.sql, { queue });
      let progressed = false;
      for (const q of queues) {
        const rows = await runtime.picker.pick(q, PICK_BATCH, worker);
        for (let i = 0; i < rows.length; i++) {
          const row = rows[i];
          if (!row) continue;
          if (tally.steps >= maxSteps) {
            await runtime.picker.release(worker, rows.slice(i));
            throw new MaxStepsExceededError(maxSteps);
          }
          const result = await runtime.executor.execute(row);
          tally.steps += 1;
          if (result.kind) tally[result.kind] += 1;
        }
        if (rows.length > 0) progressed = true;
      }
      if (!progressed) return tally;
    }
  }

  /**
   * Fires the cron schedules due at `at` (docs/design.md §29), as a node's ticker would with
   * its clock at `at`: the same read and fire statements, `missed` applied to occurrences more
   * than `schedules.grace` before `at`. Returns how many instances were inserted; `drain()`
   * runs them. Default `at`: now.
   */
  async fireSchedules(at: Date = new Date()): Promise<number> {
    let fired = 0;
    for (let round = 0; round < 100; round++) {
      const tick = await this.engine.runtime.firer.tick(at);
      fired += tick.fired;
      if (tick.advanced === 0) break;
    }
    return fired;
  }

  /**
   * Runs a heartbeat now for every step running in this process (a `drain()` or a scheduler in
   * flight), as a scheduler's would (docs/design.md §28.2): their leases are renewed and their
   * pending `ctx.progress` values stored, so `get()` answers them. The drain runs no heartbeat
   * of its own: call this while a step waits (for example on a promise the test resolves).
   * Returns how many progress values were stored.
   */
  async heartbeat(): Promise<number> {
    const runtime = this.engine.runtime;
    const byWorker = new Map<string, HeldClaim[]>();
    for (const c of runtime.executor.running.runningClaims()) {
      const list = byWorker.get(c.worker) ?? [];
      list.push({ id: c.id, claimSeq: c.claimSeq });
      byWorker.set(c.worker, list);
    }
    let stored = 0;
    for (const [worker, rows] of byWorker) {
      const progress = runtime.executor.running.pendingProgress(rows);
      const { renewed } = await HEARTBEAT.run(runtime.sql, {
        worker,
        rows,
        leaseMs: runtime.options.leaseTtl,
        ...(progress && { progress }),
      });
      if (!progress) continue;
      const renewedIds = new Set(renewed);
      stored += progress.filter((p, k) => p !== null && renewedIds.has(rows[k]!.id)).length;
      runtime.executor.running.progressStored(rows, progress, renewedIds);
    }
    return stored;
  }

  /** Fires every armed await deadline now; returns how many. */
  async fireTimeouts(): Promise<number> {
    return (await TESTING_FIRE_ALL_DEADLINES.run(this.engine.runtime.sql)).length;
  }

  /**
   * Fires the timeout of the step running now for `target` in this process (docs/design.md
   * §27.5) as if its deadline had passed: its `ctx.signal` aborts with a `StepTimeoutError`,
   * and its outcome is that error through `onError` / the job retry rule, without waiting out
   * `stepTimeout` / `@Step({ timeout })`. The step must have a timeout; call it while the step
   * runs (a `drain()` or a scheduler in flight). False when no such step runs here now.
   */
  async timeoutStep(target: Target): Promise<boolean> {
    const to = resolveTarget(target, 'timeoutStep.target');
    const id = 'id' in to ? to.id : (await this.engine.get(to))?.id;
    return id !== undefined && this.engine.runtime.executor.running.expireStep(id);
  }

  /** The row; by key it falls back to the latest row that held the key, so finished instances stay assertable. */
  async get(target: Target): Promise<InstanceView | null> {
    const to = resolveTarget(target, 'target');
    const current = await this.engine.get(to);
    if (current || 'id' in to) return current;
    const latest = await TESTING_LATEST_BY_KEY.run(this.engine.runtime.sql, {
      correlationKey: to.correlationKey,
    });
    return latest !== null ? this.engine.get({ id: latest }) : null;
  }

  async assertStatus(target: Target, status: DurableStatus): Promise<InstanceView> {
    const row = await this.require(target);
    if (row.status !== status) this.fail(row, `expected status ${status}`);
    return row;
  }

  /** Parked on a signal; with `names`, its awaits include them all. */
  async assertAwaiting(target: Target, names?: string | readonly string[]): Promise<InstanceView> {
    const row = await this.require(target);
    if (row.status !== 'awaiting_signal') this.fail(row, 'expected status awaiting_signal');
    const wanted = names === undefined ? [] : typeof names === 'string' ? [names] : names;
    const missing = wanted.filter((n) => !(row.awaits ?? []).includes(n));
    if (missing.length > 0) {
      this.fail(
        row,
        `expected to await ${wanted.join(', ')} (awaits ${(row.awaits ?? []).join(', ')})`,
      );
    }
    return row;
  }

  /** Done; with `result`, deep-equal to it. */
  async assertDone(target: Target, result?: Record<string, unknown>): Promise<InstanceView> {
    const row = await this.require(target);
    if (row.status !== 'done') this.fail(row, 'expected status done');
    if (result !== undefined) {
      try {
        deepStrictEqual(row.result, result);
      } catch {
        this.fail(
          row,
          `expected result ${JSON.stringify(result)}, got ${JSON.stringify(row.result)}`,
        );
      }
    }
    return row;
  }

  /** Failed; with `error`, its last error equals the string or matches the RegExp. */
  async assertFailed(target: Target, error?: string | RegExp): Promise<InstanceView> {
    const row = await this.require(target);
    if (row.status !== 'failed') this.fail(row, 'expected status failed');
    const last = row.lastError ?? '';
    if (error !== undefined && !(typeof error === 'string' ? last === error : error.test(last))) {
      this.fail(row, `expected last error ${String(error)}`);
    }
    return row;
  }

  /**
   * Cancelled (docs/design.md §27.1); with `reason`, its cancel reason equals the string or
   * matches the RegExp.
   */
  async assertCancelled(target: Target, reason?: string | RegExp): Promise<InstanceView> {
    const row = await this.require(target);
    if (row.status !== 'cancelled') this.fail(row, 'expected status cancelled');
    const given = row.cancelReason ?? '';
    if (
      reason !== undefined &&
      !(typeof reason === 'string' ? given === reason : reason.test(given))
    ) {
      this.fail(row, `expected cancel reason ${String(reason)}, got ${JSON.stringify(given)}`);
    }
    return row;
  }

  /** Truncates instances, inboxes and limiter counters. */
  async reset(): Promise<void> {
    await TESTING_RESET.run(this.engine.runtime.sql);
  }

  private async require(target: Target): Promise<InstanceView> {
    const to = resolveTarget(target, 'target');
    const row = await this.get(to);
    if (!row) {
      throw new AssertionError({ message: `gen-durable: no instance for ${targetLabel(to)}` });
    }
    return row;
  }

  private fail(row: InstanceView, expectation: string): never {
    throw new AssertionError({
      message:
        `gen-durable ${row.fsm}#${row.id}: ${expectation}, but it is ${row.status} at step "${row.step}" ` +
        `(attempt ${row.attempt}${row.lastError ? `, last error: ${row.lastError}` : ''})`,
    });
  }
}
