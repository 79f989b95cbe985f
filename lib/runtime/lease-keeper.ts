import { randomBytes } from 'node:crypto';

import { Logger } from '@nestjs/common';

import { retryWhileUnreachable } from '../db/retry-while-unreachable';
import type { SqlExecutor } from '../db/sql-executor';
import { LeaseLostError } from '../errors/lease-lost.error';
import { StepCancelledError } from '../errors/step-cancelled.error';
import type { ResolvedOptions } from '../options/resolved-options';
import {
  type CancelledClaim,
  HEARTBEAT,
  type HeldClaim,
  RECLAIM_PREDECESSOR,
} from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';
import type { RunningSteps } from './running-steps';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import type { Picker } from './picker';

/**
 * A pending `ctx.progress` value is written within this many ms (docs/design.md §28.2): values
 * reported meanwhile, by any step of the queue, go in the same statement.
 */
const PROGRESS_WINDOW_MS = 500;
/** The poison-pill cap a node without a reaper assumes for its startup reclaim (docs/design.md §26.5 default). */
const DEFAULT_MAX_REAPS = 5;

/**
 * One queue's claims on this node, kept (docs/design.md §4, §17.3): its worker id, the startup
 * reclaim of a dead predecessor's claims, and the heartbeat that renews every held row's lease,
 * stores pending `ctx.progress` (§28.2), and aborts the steps whose claim was lost (§27.5) or
 * whose cancel was requested (§27.2).
 */
export class LeaseKeeper {
  /** Worker ids of this queue on this node share it; startup reclaim matches it (§17.3). */
  readonly reclaimPrefix: string;
  readonly workerId: string;
  /** Epoch ms of the last successful heartbeat (health, §21). */
  lastHeartbeatAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private progressTimer: NodeJS.Timeout | undefined;
  private held: () => ClaimedRow[] = () => [];
  private stopped = false;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    private readonly options: ResolvedOptions,
    private readonly queue: string,
    private readonly running: RunningSteps,
    private readonly picker: Picker,
    private readonly telemetry: Telemetry,
    /** The node holds its liveness lock: every earlier process with its nodeId is gone. */
    private readonly predecessorGone: () => boolean,
  ) {
    this.reclaimPrefix = `${options.name}:${queue}@${options.nodeId}-`;
    this.workerId = `${this.reclaimPrefix}${randomBytes(4).toString('hex')}`;
  }

  /**
   * Reclaims a dead predecessor's claims, then heartbeats the rows `held` answers every
   * `heartbeatInterval`. The reclaim is retried like the engine's other boot statements while
   * the database is unreachable (docs/operations.md, "Boot"); a failure past bootTimeout leaves
   * the claims to the lease.
   */
  async start(held: () => ClaimedRow[]): Promise<void> {
    this.held = held;
    this.lastHeartbeatAt = Date.now();
    try {
      await retryWhileUnreachable(`startup reclaim of queue ${this.queue}`, () => this.reclaim(), {
        timeoutMs: this.options.bootTimeout,
        onRetry: (what, err) =>
          this.logger.warn(`boot: ${what} could not reach the database (${String(err)}); retrying`),
      });
    } catch (err) {
      this.logger.error(`startup reclaim of queue ${this.queue} failed: ${String(err)}`);
    }
    if (this.stopped) return;
    this.timer = setInterval(() => void this.heartbeat(held()), this.options.heartbeatInterval);
  }

  /** No heartbeat from now on. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.progressTimer) clearTimeout(this.progressTimer);
    this.timer = undefined;
    this.progressTimer = undefined;
  }

  /**
   * A step of this queue has a `ctx.progress` value pending: within {@link PROGRESS_WINDOW_MS}
   * the rows with one get an early heartbeat (one statement for all of them, which renews their
   * leases too), so a value survives the process's death after at most about a second.
   */
  progressPending(): void {
    if (this.progressTimer || this.stopped) return;
    this.progressTimer = setTimeout(() => {
      this.progressTimer = undefined;
      const rows = this.held();
      const pending = this.running.pendingProgress(rows);
      if (!pending) return;
      const withProgress = rows.filter((_, k) => pending[k] !== null);
      void this.heartbeat(withProgress);
    }, PROGRESS_WINDOW_MS);
  }

  /**
   * The node's liveness lock was taken after boot (docs/design.md §17.3): the claims earlier
   * processes with this nodeId left are taken back now. A failure is logged; the lease remains.
   */
  async reclaimLater(): Promise<void> {
    if (this.stopped) return;
    await this.reclaim().catch((err: unknown) => {
      this.logger.warn(`reclaim of queue ${this.queue} failed (the lease remains): ${String(err)}`);
    });
  }

  private async heartbeat(rows: ClaimedRow[]): Promise<void> {
    if (
      FAULTS_ENABLED &&
      (await faultPoint('heartbeat.before', {
        ids: rows.map((r) => r.id),
        worker: this.workerId,
      })) === 'skip'
    ) {
      return;
    }
    if (rows.length === 0) {
      this.lastHeartbeatAt = Date.now();
      return;
    }
    try {
      // docs/design.md §28.2: the pending ctx.progress values ride on this statement.
      const progress = this.running.pendingProgress(rows);
      const { renewed, lost, cancelRequested } = await HEARTBEAT.run(this.sql, {
        worker: this.workerId,
        rows,
        leaseMs: this.options.leaseTtl,
        ...(progress && { progress }),
      });
      this.lastHeartbeatAt = Date.now();
      if (progress) this.running.progressStored(rows, progress, new Set(renewed));
      if (lost.length > 0) this.claimsLost(lost);
      if (cancelRequested.length > 0) this.cancelsRequested(cancelRequested);
      await this.picker.renew(rows);
    } catch (err) {
      this.logger.warn(`heartbeat of queue ${this.queue} failed: ${String(err)}`);
    }
  }

  /**
   * The heartbeat found claims this worker no longer holds (docs/design.md §27.5): the steps
   * running under them get their `ctx.signal` aborted with a `LeaseLostError`. Matched by the
   * claim's token, so a row claimed again since is left alone. The step runs on and its
   * outcome is stale.
   */
  private claimsLost(lost: readonly HeldClaim[]): void {
    for (const claim of lost) {
      this.running.abortStep(
        claim.id,
        claim.claimSeq,
        (r) => new LeaseLostError(r.fsm, r.id, r.step),
      );
    }
  }

  /**
   * The heartbeat found claims whose cancel was requested (docs/design.md §27.2): the steps
   * running under them get their `ctx.signal` aborted with a `StepCancelledError` (once; a
   * later heartbeat finds the signal aborted already). Matched by the claim's token. The
   * flush turns their outcome into `cancelled`.
   */
  private cancelsRequested(claims: readonly CancelledClaim[]): void {
    for (const claim of claims) {
      this.running.abortStep(
        claim.id,
        claim.claimSeq,
        (r) => new StepCancelledError(r.fsm, r.id, r.step, claim.reason),
      );
    }
  }

  /**
   * Takes back the claims earlier processes with this nodeId left (docs/design.md §17.3): all of
   * them once the node's liveness lock proves those processes gone, else only those whose lease
   * has missed two heartbeats. Also run when the lock is taken after boot.
   */
  async reclaim(): Promise<void> {
    const margin = Math.max(this.options.leaseTtl - 2 * this.options.heartbeatInterval, 0);
    const maxReaps = this.options.reaper ? this.options.reaper.maxReaps : DEFAULT_MAX_REAPS;
    const rows = await RECLAIM_PREDECESSOR.run(this.sql, {
      queue: this.queue,
      workerPrefix: this.reclaimPrefix,
      leaseBelowMs: this.predecessorGone() ? null : margin,
      maxReaps,
      spreadMs: this.options.leaseTtl,
      ownWorker: this.workerId,
    });
    if (rows.length > 0) {
      this.telemetry.emit('scheduler:reclaimed', { count: rows.length }, { queue: this.queue });
    }
  }
}
