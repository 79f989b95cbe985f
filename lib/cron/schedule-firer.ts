import { Logger } from '@nestjs/common';

import type { FsmRegistry } from '../discovery/fsm.registry';
import { ALL_STATUSES, LIVE_STATUSES } from '../gen-durable.constants';
import { toJsonObjectText } from '../serialization/json-value';
import { type DueSchedule, DUE_SCHEDULES, FIRE_SCHEDULE } from '../sql/cron.sql';
import type { StatementRunner } from '../sql/statement';
import type { Telemetry } from '../telemetry/telemetry';
import { CronExpression } from './cron-expression';
import { planFire } from './fire-plan';
import type { CronFireInfo } from './schedule-spec';

/** Schedules read per tick at most; a full read ticks again at once. */
const DUE_BATCH = 100;

/** What one tick did. */
export interface TickResult {
  /** Instances inserted. */
  readonly fired: number;
  /** Schedules this tick advanced (the others were fired by another node first, or not due). */
  readonly advanced: number;
  /** The database clock the tick fired on. */
  readonly now: Date;
  /** The earliest next fire among the schedules read (null: none); `now` when more are due. */
  readonly nextAt: Date | null;
}

/**
 * One tick over the schedule table (docs/design.md §29): one read of the due schedules of this
 * node's FSMs, then one statement per due schedule that advances it by compare-and-set and
 * inserts its instances (FIRE_SCHEDULE). No leader: any number of nodes may tick at once; a
 * fire another node made first matches nothing here. `tick(at)` fires what is due at `at`
 * instead of the database's now (testing `fireSchedules`).
 */
export class ScheduleFirer {
  private readonly logger = new Logger('GenDurable');
  private readonly parsed = new Map<string, CronExpression>();

  constructor(
    private readonly sql: StatementRunner,
    private readonly registry: FsmRegistry,
    private readonly config: { readonly grace: number; readonly maxStateBytes: number },
    private readonly telemetry: Telemetry,
    private readonly poke: (queues: Iterable<string>) => void,
  ) {}

  async tick(at: Date | null = null): Promise<TickResult> {
    const fsms = this.registry.names();
    if (fsms.length === 0) return { fired: 0, advanced: 0, now: at ?? new Date(), nextAt: null };
    const read = await DUE_SCHEDULES.run(this.sql, { at, fsms, limit: DUE_BATCH });
    const now = read.now;
    let fired = 0;
    let advanced = 0;
    let nextAt: Date | null = null;
    const earlier = (d: Date | null): void => {
      if (d !== null && (nextAt === null || d.getTime() < nextAt.getTime())) nextAt = d;
    };
    let due = 0;
    for (const schedule of read.schedules) {
      if (schedule.nextFireAt.getTime() > now.getTime()) {
        earlier(schedule.nextFireAt);
        break;
      }
      due++;
      const outcome = await this.fire(schedule, now);
      fired += outcome.fired;
      if (outcome.advanced) advanced++;
      earlier(outcome.next);
    }
    if (due === DUE_BATCH) nextAt = now;
    return { fired, advanced, now, nextAt };
  }

  /** Fires one due schedule; never throws (a bad row is logged and left for the next tick). */
  private async fire(
    s: DueSchedule,
    now: Date,
  ): Promise<{ fired: number; advanced: boolean; next: Date | null }> {
    try {
      const definition = this.registry.resolve(s.fsm);
      const cron = this.expression(s.cron, s.tz);
      const plan = planFire(
        cron,
        s.nextFireAt,
        now,
        s.missed,
        s.options.maxCatchup,
        this.config.grace,
      );
      const base = s.options.stateFromFunction
        ? (this.registry.declaredSchedule(s.name)?.stateFn?.() ?? s.state)
        : s.state;
      const keys: string[] = [];
      const states: string[] = [];
      for (const f of plan.fires) {
        const at = f.at.toISOString();
        const info: CronFireInfo = { at, missed: f.missed };
        keys.push(s.overlap === 'skip' ? `cron:${s.name}` : `cron:${s.name}:${at}`);
        states.push(
          toJsonObjectText(
            { ...(base as Record<string, unknown>), _cron: info },
            `schedule ${s.name}.state`,
            this.config.maxStateBytes,
          ),
        );
      }
      const last = plan.fires[plan.fires.length - 1]?.at ?? null;
      const queue = s.options.queue ?? definition.queue;
      const result = await FIRE_SCHEDULE.run(this.sql, {
        name: s.name,
        expected: s.nextFireText,
        hash: s.hash,
        next: plan.next,
        last,
        fsm: definition.name,
        fsmVersion: definition.version,
        step: definition.initial,
        queue,
        priority: s.options.priority,
        scope: (s.overlap === 'skip' ? LIVE_STATUSES : ALL_STATUSES).join(','),
        keys,
        states,
      });
      if (!result.advanced) return { fired: 0, advanced: false, next: plan.next };
      if (result.ids.length > 0) {
        this.telemetry.emit(
          'cron:fired',
          { count: result.ids.length },
          { name: s.name, fsm: definition.name, at: last?.toISOString() ?? '' },
        );
        this.poke([queue]);
      }
      if (plan.missed > 0) {
        this.telemetry.emit(
          'cron:missed',
          { count: plan.missed },
          { name: s.name, policy: s.missed },
        );
      }
      const skipped = plan.fires.length - result.ids.length;
      if (skipped > 0) {
        this.telemetry.emit(
          'cron:skipped',
          { count: skipped },
          { name: s.name, reason: s.overlap === 'skip' ? 'overlap' : 'duplicate' },
        );
      }
      return { fired: result.ids.length, advanced: true, next: plan.next };
    } catch (err) {
      this.logger.error(
        `schedule "${s.name}" could not fire: ${err instanceof Error ? err.message : String(err)}`,
      );
      return { fired: 0, advanced: false, next: null };
    }
  }

  private expression(cron: string, tz: string): CronExpression {
    const key = `${tz}\u0000${cron}`;
    let parsed = this.parsed.get(key);
    if (!parsed) {
      parsed = CronExpression.parse(cron, tz);
      this.parsed.set(key, parsed);
    }
    return parsed;
  }
}
