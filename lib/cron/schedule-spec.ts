import type { Type } from '@nestjs/common';

/**
 * The public shapes of a cron schedule (docs/design.md §29): what `@DurableCron` and
 * `engine.schedules.upsert` take, and what `engine.schedules.list` answers.
 */

/** What a tick does with occurrences missed while no node fired (downtime, a pause of the loop). */
export type MissedPolicy = 'skip' | 'once' | 'all';

/** `'skip'`: no fire while an instance of the schedule is still live; `'allow'`: fire anyway. */
export type OverlapPolicy = 'skip' | 'allow';

/** The fields shared by `@DurableCron` and `engine.schedules.upsert`. */
export interface ScheduleFields {
  /** IANA time zone the expression is read in. Default `'UTC'`. */
  tz?: string;
  /**
   * Occurrences missed by more than `schedules.grace` (downtime): `'skip'` fires none of them,
   * `'once'` fires one instance for the latest with `state._cron.missed` = how many were
   * missed, `'all'` fires each of the latest `maxCatchup`. Default `'skip'`.
   */
  missed?: MissedPolicy;
  /** `missed: 'all'`: catch-up fires per tick at most (the latest ones). Default 10. */
  maxCatchup?: number;
  /**
   * `'skip'`: an occurrence whose previous instance is still live is skipped (`cron:skipped`),
   * through the live-scoped correlation key `cron:<name>`. Default `'allow'`: every occurrence
   * fires, each under the key `cron:<name>:<instant ISO>` held until GC.
   */
  overlap?: OverlapPolicy;
  /** Queue of fired instances. Default the FSM's. */
  queue?: string;
  /** Priority of fired instances (smallint, lower first). Default 0. */
  priority?: number;
}

/** Options of `@DurableCron(expression, options)`. */
export interface DurableCronOptions extends ScheduleFields {
  /** The schedule's stable name (its key in `gen_durable_schedules`). Default the FSM name; required when a class declares several. */
  name?: string;
  /**
   * State of each fired instance (a JSON object; `_cron` is added), or a function of the class
   * returning it, called at each fire on the firing node. Default `{}`.
   */
  state?: Record<string, unknown> | (() => Record<string, unknown>);
}

/** A schedule defined at run time (`engine.schedules.upsert`). */
export interface ScheduleSpec extends ScheduleFields {
  /** The schedule's stable name. */
  name: string;
  /** The FSM each fire inserts: a `@DurableFsm` class or its name. */
  fsm: Type<unknown> | string;
  /** The cron expression: 5 fields, or 6 with seconds first; nicknames such as `@daily`. */
  cron: string;
  /** State of each fired instance (a JSON object; `_cron` is added). Default `{}`. */
  state?: Record<string, unknown>;
}

/** A stored schedule, as `engine.schedules.list()` and `upsert()` answer. */
export interface ScheduleView {
  readonly name: string;
  readonly fsm: string;
  readonly cron: string;
  readonly tz: string;
  readonly nextFireAt: Date;
  readonly lastFireAt: Date | null;
  readonly paused: boolean;
  readonly missed: MissedPolicy;
  readonly overlap: OverlapPolicy;
  readonly maxCatchup: number;
  /** Null: the FSM's queue. */
  readonly queue: string | null;
  readonly priority: number;
  readonly state: Record<string, unknown>;
  /** True for a `@DurableCron` schedule, false for one upserted at run time. */
  readonly declared: boolean;
  readonly updatedAt: Date;
}

/** `state._cron` of a fired instance. */
export interface CronFireInfo {
  /** The occurrence fired, ISO 8601 (UTC). */
  readonly at: string;
  /** Occurrences this fire stands for that were not fired (`missed: 'once'`, or past `maxCatchup`). */
  readonly missed: number;
}
