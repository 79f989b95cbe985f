import { Inject, Injectable } from '@nestjs/common';
import { type HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';

import type { EngineService } from '../engine/engine.service';
import { SCHEDULE_LAG } from '../sql/cron.sql';
import { HEALTH_LEASE_BACKLOG, HEALTH_RUNNABLE_BACKLOG } from '../sql/health.sql';
import { settleWithin } from '../util/settle-within';

export const GEN_DURABLE_HEALTH_ENGINE = 'gen-durable:health-engine';

const CHECK_TIMEOUT_MS = 3000;

export interface LeaseBacklogOptions {
  /** How late an expired lease or deadline may be before it counts, ms. Default 2 × reaper.interval (60 000 without a local reaper). */
  graceMs?: number;
  /** Late rows tolerated. Default 0. */
  maxRows?: number;
  /** Check timeout, ms. Default 3 000. */
  timeoutMs?: number;
}

export interface RunnableBacklogOptions {
  /**
   * Queues to check. Default this node's queues, plus (on a node that runs queues) the queues of
   * registered FSMs that it does not run, reported with `served: false` and never driving the
   * check down (another node may serve them).
   */
  queues?: string[];
  /** Oldest acceptable pick-order head, ms. Default 300 000. */
  maxAgeMs?: number;
  /** Depth reported at most. Default 10 000. */
  depthCap?: number;
  /** Check timeout, ms. Default 3 000. */
  timeoutMs?: number;
}

export interface ScheduleLagOptions {
  /** How late the oldest due schedule may be, ms. Default 2 × schedules.interval (60 000 with schedules off). */
  maxLagMs?: number;
  /** Check timeout, ms. Default 3 000. */
  timeoutMs?: number;
}

export interface SchedulerLivenessOptions {
  /** Longest tolerated gap in loop activity and heartbeats, ms. Default max(3 × maxPollInterval, 3 × heartbeatInterval). */
  maxStallMs?: number;
}

/** A check's query, or the timeout's error (the check answers down with it). */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  return settleWithin(work, ms, () => new Error(`health check timed out after ${ms} ms`));
}

/**
 * Terminus health checks of one engine (docs/design.md §21). Each is one index-served query or a memory
 * read, has a timeout, and reports down with details instead of throwing.
 */
@Injectable()
export class GenDurableHealthIndicator {
  constructor(
    @Inject(GEN_DURABLE_HEALTH_ENGINE) private readonly engine: EngineService,
    private readonly health: HealthIndicatorService,
  ) {}

  /** Is a reaper alive and keeping up? Down when expired leases or overdue deadlines pile up past the grace. */
  async leaseBacklog(
    key: string,
    options: LeaseBacklogOptions = {},
  ): Promise<HealthIndicatorResult> {
    const indicator = this.health.check(key);
    const runtime = this.engine.runtime;
    const reaper = runtime.options.reaper;
    const graceMs = options.graceMs ?? (reaper ? 2 * reaper.interval : 60_000);
    const maxRows = options.maxRows ?? 0;
    try {
      const row = await withTimeout(
        HEALTH_LEASE_BACKLOG.run(runtime.sql, { graceMs, cap: maxRows + 1 }),
        options.timeoutMs ?? CHECK_TIMEOUT_MS,
      );
      const details = {
        expiredLeases: row.expired,
        overdueDeadlines: row.overdue,
        graceMs,
        maxRows,
      };
      return row.expired <= maxRows && row.overdue <= maxRows
        ? indicator.up(details)
        : indicator.down(details);
    } catch (err) {
      return indicator.down({ error: err instanceof Error ? err.message : String(err) });
    }
  }

  /** Are the queues drained? Down when a queue's pick-order head is older than maxAgeMs. */
  async runnableBacklog(
    key: string,
    options: RunnableBacklogOptions = {},
  ): Promise<HealthIndicatorResult> {
    const indicator = this.health.check(key);
    const runtime = this.engine.runtime;
    const local = Object.keys(runtime.options.queues);
    const unserved =
      options.queues === undefined && local.length > 0
        ? [...runtime.registry.queuesOutside(local).keys()]
        : [];
    const queues = options.queues ?? [...local, ...unserved];
    const maxAgeMs = options.maxAgeMs ?? 300_000;
    const depthCap = options.depthCap ?? 10_000;
    if (queues.length === 0) return indicator.up({ queues: {} });
    try {
      const rows = await withTimeout(
        // On the read replica when the engine has one: a head may look older by the replica's
        // lag. The lease backlog and schedule lag stay on the primary: a stale replica would
        // show a lease reaped or a schedule fired there as overdue (docs/operations.md).
        HEALTH_RUNNABLE_BACKLOG.run(runtime.reads, { queues, depthCap }),
        options.timeoutMs ?? CHECK_TIMEOUT_MS,
      );
      const details: Record<
        string,
        {
          headAgeMs: number;
          depth: number;
          depthCapped: boolean;
          served?: false;
          paused?: true;
        }
      > = {};
      let down = false;
      for (const r of rows) {
        const age = Math.max(0, Math.round(r.headAgeMs ?? 0));
        const depthCapped = r.depth >= depthCap;
        const detail = {
          headAgeMs: age,
          depth: r.depth,
          depthCapped,
          ...(unserved.includes(r.queue) ? { served: false as const } : {}),
          // A paused queue ages by the operator's choice (docs/design.md §27.6): reported, never down.
          ...(r.paused ? { paused: true as const } : {}),
        };
        details[r.queue] = detail;
        if (detail.served === undefined && detail.paused === undefined && age > maxAgeMs) {
          down = true;
        }
      }
      return down
        ? indicator.down({ maxAgeMs, queues: details })
        : indicator.up({ maxAgeMs, queues: details });
    } catch (err) {
      return indicator.down({ error: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * Are cron schedules firing? Down when an un-paused schedule's next fire is more than
   * `maxLagMs` in the past (no node fires it: none runs its FSM with schedules on, or the
   * tickers are stuck). One index-ordered read of gen_durable_schedules_due (docs/design.md §29).
   */
  async scheduleLag(key: string, options: ScheduleLagOptions = {}): Promise<HealthIndicatorResult> {
    const indicator = this.health.check(key);
    const runtime = this.engine.runtime;
    const schedules = runtime.options.schedules;
    const maxLagMs = options.maxLagMs ?? (schedules ? 2 * schedules.interval : 60_000);
    try {
      const lag = await withTimeout(
        SCHEDULE_LAG.run(runtime.sql, { maxLagMs, cap: 100 }),
        options.timeoutMs ?? CHECK_TIMEOUT_MS,
      );
      const details = {
        lagMs: Math.round(lag.lagMs),
        oldest: lag.name,
        overdue: lag.overdue,
        maxLagMs,
      };
      return lag.lagMs <= maxLagMs ? indicator.up(details) : indicator.down(details);
    } catch (err) {
      return indicator.down({ error: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * Memory read: every local scheduler running (not draining) with recent loop activity and a
   * successful heartbeat, local reaper/GC sweeping, no event-loop stall in progress.
   */
  schedulerLiveness(key: string, options: SchedulerLivenessOptions = {}): HealthIndicatorResult {
    const indicator = this.health.check(key);
    const runtime = this.engine.runtime;
    const o = runtime.options;
    const maxStallMs =
      options.maxStallMs ?? Math.max(3 * o.maxPollInterval, 3 * o.heartbeatInterval);
    const now = Date.now();
    const problems: string[] = [];
    const schedulers: Record<
      string,
      {
        status: string;
        inFlight: number;
        awaitingCommit: number;
        buffered: number;
        sinceActivityMs: number;
        sinceHeartbeatMs: number;
        paused?: true;
      }
    > = {};
    for (const [queue, s] of runtime.schedulers) {
      const sinceActivityMs = now - s.lastActivityAt;
      const sinceHeartbeatMs = now - s.lastHeartbeatAt;
      schedulers[queue] = {
        status: s.status,
        inFlight: s.inFlightCount,
        awaitingCommit: s.awaitingCommitCount,
        buffered: s.bufferedCount,
        sinceActivityMs,
        sinceHeartbeatMs,
        ...(s.paused ? { paused: true as const } : {}),
      };
      if (s.status !== 'running') problems.push(`scheduler ${queue} is ${s.status}`);
      else if (sinceActivityMs > maxStallMs) {
        problems.push(`scheduler ${queue} idle for ${sinceActivityMs} ms`);
      } else if (sinceHeartbeatMs > maxStallMs) {
        problems.push(`scheduler ${queue} has not heartbeated for ${sinceHeartbeatMs} ms`);
      }
    }
    if (o.reaper && runtime.reaper && now - runtime.reaper.lastSweepAt > 3 * o.reaper.interval) {
      problems.push('reaper has not swept');
    }
    if (o.gc && runtime.gc && now - runtime.gc.lastSweepAt > 3 * o.gc.interval) {
      problems.push('gc has not swept');
    }
    if (runtime.stall.stalled) {
      problems.push(`event loop stalled for ${runtime.stall.lastStallMs} ms`);
    }
    const details = { schedulers: Object.keys(schedulers).length, queues: schedulers, maxStallMs };
    return problems.length === 0 ? indicator.up(details) : indicator.down({ ...details, problems });
  }
}
