import { Cron } from 'croner';

/**
 * The one wrapper around the cron library (`croner`, no native code, time zones through the
 * platform's `Intl`): parses an expression in an IANA zone and answers occurrences after an
 * instant (docs/design.md §29). The library does the calendar and DST math; this file only
 * validates and adapts.
 *
 * DST, as croner computes it and test/unit/cron-expression.spec.ts pins with fixed instants:
 * - a local time that does not exist (the spring-forward gap) fires at the next valid instant
 *   (Europe/Berlin `30 2 * * *` on 2026-03-29 fires at 03:00 CEST = 01:00Z);
 * - a local time that happens twice (the fall-back repeat) fires once, at its first instant,
 *   for an expression whose seconds, minutes and hours have no wildcard or step (`30 1 * * *`,
 *   `0,30 2 * * *`);
 * - an interval expression (a wildcard or step in the time fields, `*\/30 * * * *`) follows
 *   elapsed time, so it fires at each real instant of the repeated hour, as Vixie cron does.
 */
export class CronExpression {
  private readonly cron: Cron;

  private constructor(
    readonly expression: string,
    readonly timeZone: string,
  ) {
    // `paused`: the library's own timer never starts; only its date math is used.
    // `fixedTimeRule: 'no-wildcard'`: lists and ranges of hours count as fixed times too, so
    // `0,30 2 * * *` fires each of its times once in a repeated hour.
    this.cron = new Cron(expression, {
      timezone: timeZone,
      paused: true,
      mode: '5-or-6-parts',
      fixedTimeRule: 'no-wildcard',
    });
  }

  /**
   * Parses `expression` (5 fields, or 6 with seconds first; nicknames such as `@daily`) in
   * `timeZone`. Throws a `CronInputError` saying whether the expression or the zone is wrong.
   */
  static parse(expression: unknown, timeZone: unknown = 'UTC'): CronExpression {
    if (typeof expression !== 'string' || expression.trim().length === 0) {
      throw new CronInputError('cron', 'must be a non-empty cron expression string');
    }
    if (!isTimeZone(timeZone)) {
      throw new CronInputError(
        'tz',
        `${JSON.stringify(timeZone)} is not an IANA time zone this runtime knows (e.g. 'UTC', 'Europe/Berlin', 'America/New_York')`,
      );
    }
    let parsed: CronExpression;
    try {
      parsed = new CronExpression(expression, timeZone);
    } catch (err) {
      throw new CronInputError(
        'cron',
        `${JSON.stringify(expression)} is not a valid cron expression (${err instanceof Error ? err.message : String(err)})`,
      );
    }
    if (parsed.nextAfter(new Date(0)) === null) {
      throw new CronInputError('cron', `${JSON.stringify(expression)} never fires`);
    }
    return parsed;
  }

  /** The first occurrence strictly after `instant`, or null when there is none. */
  nextAfter(instant: Date): Date | null {
    return this.cron.nextRun(instant);
  }

  /**
   * Occurrences `o` with `from ≤ o ≤ until`, in order, at most `limit` of them; `truncated` is
   * true when more exist in the range.
   */
  between(from: Date, until: Date, limit: number): { instants: Date[]; truncated: boolean } {
    const instants: Date[] = [];
    let cursor: Date | null = new Date(from.getTime() - 1);
    for (;;) {
      cursor = this.cron.nextRun(cursor);
      if (cursor === null || cursor.getTime() > until.getTime()) {
        return { instants, truncated: false };
      }
      if (instants.length === limit) return { instants, truncated: true };
      instants.push(cursor);
    }
  }

  /** The latest `count` occurrences at or before `until`, in order. */
  latestUpTo(until: Date, count: number): Date[] {
    return this.cron.previousRuns(count, new Date(until.getTime() + 1)).reverse();
  }
}

/** What was wrong with a cron expression or zone: `field` is `'cron'` or `'tz'`. */
export class CronInputError extends Error {
  constructor(
    readonly field: 'cron' | 'tz',
    readonly problem: string,
  ) {
    super(`${field}: ${problem}`);
  }
}

/** True for an IANA zone name the runtime's `Intl` accepts. */
export function isTimeZone(value: unknown): value is string {
  if (typeof value !== 'string' || value.length === 0) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return true;
  } catch {
    return false;
  }
}
