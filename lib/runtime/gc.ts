import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import type { RetentionOverride } from '../fsm/retention';
import type { Limiter } from '../limiter/limiter.interface';
import { GC_DELETE, GC_SELECT_TERMINAL } from '../sql/maintenance.sql';
import type { Telemetry } from '../telemetry/telemetry';
import { ArchiveSweep } from './archive-sweep';
import { sweepFairHeads } from './fair-heads-sweep';
import { PeriodicTask } from './periodic-task';

/**
 * Every `gc.interval` (docs/design.md §18): deletes up to `batch` ended rows older than their
 * retention (per status: `retention` for done, `failedRetention`, `cancelledRetention`; an FSM
 * registered here may override any of them),
 * sparing children of live parents, a full batch sweeping again at once (§18.1); then the
 * limiter prunes idle rate buckets and reconciles gate counters from the executing rows
 * (§18.2–18.3; no-ops on Redis). `gc:swept {count, heads, buckets, gates}` when anything changed.
 * Unless `archive` is `'off'`, each sweep then runs the archive's pass (docs/archive.md:
 * partitions ahead, expired partitions dropped, ended rows moved out of the hot table),
 * `gc:archived {instances, history, chunks, created, dropped}` when it changed anything.
 * Then the fairness heads whose key has no live row left are deleted (docs/many-tenants.md;
 * lib/runtime/fair-heads-sweep.ts), counted in `gc:swept`'s `heads`.
 */
export class GarbageCollector {
  private readonly periodic: PeriodicTask;
  private readonly logger = new Logger('GenDurable');
  lastSweepAt = 0;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly config: {
      readonly interval: number;
      readonly retention: number;
      readonly failedRetention: number;
      readonly cancelledRetention: number;
      readonly batch: number;
      readonly archive: 'hour' | 'day' | 'off';
      readonly archiveAfter: number;
    },
    private readonly telemetry: Telemetry,
    private readonly limiter?: Limiter,
    /** The FSMs registered here that keep some status for another time than the module's. */
    private readonly overrides: readonly {
      readonly fsm: string;
      readonly retention: RetentionOverride;
    }[] = [],
  ) {
    this.periodic = new PeriodicTask(config.interval, () => this.sweep('floor'));
    this.archive =
      config.archive === 'off'
        ? null
        : new ArchiveSweep(sql, {
            grain: config.archive,
            afterMs: config.archiveAfter,
            batch: config.batch,
            retention: {
              done: config.retention,
              failed: config.failedRetention,
              cancelled: config.cancelledRetention,
            },
            overrides,
          });
  }

  private readonly archive: ArchiveSweep | null;

  start(): void {
    this.lastSweepAt = Date.now();
    this.periodic.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.periodic.stop();
  }

  private stopping = false;

  /**
   * Sweeps until a batch comes back short; returns rows deleted. The archive's pass is full
   * (`'full'`, the default: a call from outside) or walks from its floor (`'floor'`: the
   * periodic sweep; lib/runtime/archive-sweep.ts).
   */
  async sweep(archiveScan: 'floor' | 'full' = 'full'): Promise<number> {
    let count = 0;
    let swept = false;
    try {
      for (;;) {
        const ids = await GC_SELECT_TERMINAL.run(this.sql, {
          limit: this.config.batch,
          retention: {
            done: this.config.retention,
            failed: this.config.failedRetention,
            cancelled: this.config.cancelledRetention,
          },
          overrides: this.overrides,
        });
        if (ids.length > 0) count += await GC_DELETE.run(this.sql, { ids });
        if (ids.length < this.config.batch || this.stopping) break;
      }
      swept = true;
    } catch (err) {
      this.logger.error(`GC sweep failed: ${String(err)}`);
    }
    if (this.archive && !this.stopping) {
      try {
        const pass = await this.archive.run(() => this.stopping, archiveScan);
        if (pass.moved.instances + pass.created + pass.dropped > 0) {
          this.telemetry.emit(
            'gc:archived',
            { ...pass.moved, created: pass.created, dropped: pass.dropped },
            {},
          );
        }
      } catch (err) {
        swept = false;
        this.logger.error(`GC archive pass failed: ${String(err)}`);
      }
    }
    let heads = 0;
    try {
      if (!this.stopping) {
        heads = await sweepFairHeads(this.sql, this.config.batch, () => this.stopping);
      }
    } catch (err) {
      swept = false;
      this.logger.error(`GC fairness heads sweep failed: ${String(err)}`);
    }
    let limits = { buckets: 0, gates: 0 };
    try {
      if (this.limiter && !this.stopping) limits = await this.limiter.reconcile();
    } catch (err) {
      this.logger.error(`GC limiter reconcile failed: ${String(err)}`);
    }
    if (count + heads + limits.buckets + limits.gates > 0) {
      this.telemetry.emit('gc:swept', { count, heads, ...limits }, {});
    }
    if (swept) this.lastSweepAt = Date.now();
    return count;
  }
}
