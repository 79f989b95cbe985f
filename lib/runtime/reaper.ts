import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { isTerminalStatus } from '../gen-durable.constants';
import { CONSUME_INBOXES, JOIN_PARENTS } from '../sql/outcome.sql';
import { REAP_EXPIRED } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { fireAwaitDeadlines } from './await-deadlines';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import { PeriodicTask } from './periodic-task';
import { SweepFloor } from './sweep-floor';

const BATCH = 10_000;

/**
 * How far behind the previous sweep's `now()` the next one starts (docs/design.md §17.2): a
 * lease is its claim's or heartbeat's `now()` plus the lease TTL, so only a claim or heartbeat
 * whose transaction committed more than TTL + this late writes one behind the floor.
 */
export const REAP_FLOOR_SLACK_MS = 5_000;

/**
 * Every `reaper.interval`: expired leases back to runnable with attempt + 1 (rows at the
 * poison-pill cap become suspects, suspects lost during their solo run are failed, §26.5),
 * then overdue await deadlines (docs/design.md §8.5, §17.2), then due instance deadlines
 * (docs/operations-control.md "Instance deadlines"). Skip-locked (the instance deadlines: each
 * row locked and checked again), so several reapers in a cluster are safe.
 * The periodic sweeps scan expired leases from a floor ({@link SweepFloor}: the previous
 * sweep's `now()` less {@link REAP_FLOOR_SLACK_MS}, lowered to a row it left), the first and
 * every tenth one in full (docs/design.md §17.2); a sweep called directly is full.
 */
export class Reaper {
  private readonly periodic: PeriodicTask;
  private readonly logger = new Logger('GenDurable');
  lastSweepAt = 0;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly interval: number,
    private readonly maxReaps: number,
    private readonly telemetry: Telemetry,
    private readonly poke: (queues: Iterable<string>) => void,
    private readonly settled: (ids: readonly string[]) => void,
    /** Rows reaped again spread over reaps × this many ms (the lease TTL; see REAP_EXPIRED). */
    private readonly spreadMs = 0,
    /** FSM names whose history level is `'off'` / `'full'` (docs/design.md §28.1). */
    private readonly history: {
      readonly off: readonly string[];
      readonly full: readonly string[];
    } = { off: [], full: [] },
    /** Told of each row failed as a poison pill, after its commit (docs/events.md). */
    private readonly onPoisoned: (
      row: { id: string; fsm: string; step: string },
      message: string,
    ) => void = () => undefined,
    /** Fires the due instance deadlines (docs/operations-control.md "Instance deadlines"); answers how many it ended or moved. */
    private readonly fireInstanceDeadlines: () => Promise<number> = () => Promise.resolve(0),
  ) {
    this.periodic = new PeriodicTask(interval, () => this.sweep('floor'));
  }

  private readonly floor = new SweepFloor(REAP_FLOOR_SLACK_MS);

  start(): void {
    this.lastSweepAt = Date.now();
    this.periodic.start();
  }

  /**
   * One sweep now (or the one in progress), at the end of the engine's start: leases a crashed
   * node left behind are reaped at boot, not one interval later (until then readiness's
   * `leaseBacklog` would report them). It runs after the schedulers' startup reclaim, which
   * takes this node's own predecessor's claims back without an attempt.
   */
  async sweepNow(): Promise<void> {
    await this.periodic.runNow();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /**
   * One sweep; returns what it did (also used by tests and the testing helpers): `poisoned`
   * counts poison pills failed; rows whose cancel was requested and whose lease ran out are
   * cancelled (docs/design.md §27.2) and counted in neither. `'full'` (the default, a call from
   * outside) scans every expired lease; `'floor'` (the periodic sweep) scans from where the
   * floor says, a full sweep when it says so.
   */
  async sweep(scan: 'floor' | 'full' = 'full'): Promise<{
    reaped: number;
    poisoned: number;
    timeouts: number;
    deadlines: number;
  }> {
    let reaped = 0;
    let poisoned = 0;
    let timeouts = 0;
    let deadlines = 0;
    try {
      const queues = new Set<string>();
      // One transaction: a row failed as a poison pill commits together with its inbox consume
      // and its parent's join, or not at all (a terminal child whose join was lost would leave
      // its parent awaiting_children forever). The next sweep retries a rolled-back reap.
      const from = scan === 'full' ? null : this.floor.start();
      const { rows, failed, swept } = await this.sql.transaction(async (tx) => {
        const sweep = await REAP_EXPIRED.run(
          this.sql,
          {
            maxReaps: this.maxReaps,
            limit: BATCH,
            spreadMs: this.spreadMs,
            historyOff: this.history.off,
            historyFull: this.history.full,
            from,
          },
          tx,
        );
        const reapedRows = sweep.rows;
        if (FAULTS_ENABLED) {
          await faultPoint('reaper.afterSelect', { ids: reapedRows.map((r) => r.id) });
        }
        // Poison pills (failed) and rows whose cancel was requested (cancelled) ended here.
        const poisonedRows = reapedRows.filter((r) => isTerminalStatus(r.status));
        if (poisonedRows.length > 0) {
          await CONSUME_INBOXES.run(this.sql, { ids: poisonedRows.map((r) => r.id) }, tx);
          const parents = poisonedRows.flatMap((r) => (r.parentId !== null ? [r.parentId] : []));
          if (parents.length > 0) {
            const woken = await JOIN_PARENTS.run(this.sql, { parentIds: parents }, tx);
            for (const p of woken) if (p.status === 'runnable') queues.add(p.queue);
          }
        }
        return { rows: reapedRows, failed: poisonedRows, swept: sweep };
      });
      // Learnt after the commit: a rolled-back sweep leaves the floor where it was.
      this.floor.learn(from, {
        cutoff: swept.dbNow,
        complete: swept.seen < BATCH,
        left: swept.left,
      });
      reaped = rows.length - failed.length;
      const cancelled = failed.filter((r) => r.status === 'cancelled');
      const pills = failed.filter((r) => r.status === 'failed');
      poisoned = pills.length;
      for (const r of rows) if (r.status === 'runnable') queues.add(r.queue);
      if (reaped > 0) this.telemetry.emit('reaper:reaped', { count: reaped }, {});
      for (const r of rows) {
        if (!r.suspected) continue;
        this.logger.warn(
          `poison-pill suspect: ${r.fsm}#${r.id} step ${r.step} lost its worker ${r.reaps} times while it ran; its next run is alone on its node`,
        );
        this.telemetry.emit(
          'reaper:suspect',
          { count: 1 },
          { id: r.id, fsm: r.fsm, step: r.step, reaps: r.reaps },
        );
      }
      if (cancelled.length > 0) {
        this.telemetry.emit('reaper:cancelled', { count: cancelled.length }, {});
      }
      if (failed.length > 0) {
        for (const r of pills) {
          const message = `poison pill: ${r.fsm}#${r.id} step ${r.step} lost its worker ${r.reaps} times, the last while it ran alone; failed`;
          this.logger.error(message);
          this.onPoisoned({ id: r.id, fsm: r.fsm, step: r.step }, message);
          this.telemetry.emit(
            'reaper:poisoned',
            { count: 1 },
            { id: r.id, fsm: r.fsm, step: r.step, reaps: r.reaps },
          );
        }
        this.settled(failed.map((r) => r.id));
      }
      this.poke(queues);
      timeouts = await fireAwaitDeadlines(this.sql, this.telemetry, this.poke);
      deadlines = await this.fireInstanceDeadlines();
      this.lastSweepAt = Date.now();
    } catch (err) {
      this.logger.error(`reaper sweep failed: ${String(err)}`);
    }
    return { reaped, poisoned, timeouts, deadlines };
  }
}
