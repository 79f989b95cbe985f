import type { CronExpression } from './cron-expression';
import type { MissedPolicy } from './schedule-spec';

/** Occurrences counted per tick at most; a longer gap reports this many missed (docs/cron.md). */
export const MAX_COUNTED_OCCURRENCES = 1_000;

/** One instance to insert: the occurrence it stands for and `state._cron.missed`. */
export interface PlannedFire {
  readonly at: Date;
  readonly missed: number;
}

/** What one tick does with one due schedule. */
export interface FirePlan {
  /** In occurrence order. */
  readonly fires: readonly PlannedFire[];
  /** Occurrences found more than the grace late (`cron:missed`), whatever the policy fired for them. */
  readonly missed: number;
  /** The first occurrence after `now`, or null (none: the schedule is paused). */
  readonly next: Date | null;
}

/**
 * Plans one fire of a due schedule (docs/design.md §29), pure: the occurrences from `expected`
 * (the stored `next_fire_at`) up to `now` (the database clock) are due. Those at most `graceMs`
 * old are on time and fire. The older ones were missed (downtime, a stalled loop): `skip` fires
 * none of them; `once` fires one instance for the latest with `missed` = how many were missed;
 * `all` fires the latest `maxCatchup` of them, the earliest fired one carrying `missed` = how
 * many were dropped beyond the cap. The next fire is the first occurrence after `now`.
 */
export function planFire(
  cron: CronExpression,
  expected: Date,
  now: Date,
  policy: MissedPolicy,
  maxCatchup: number,
  graceMs: number,
): FirePlan {
  const next = cron.nextAfter(now);
  const counted = cron.between(expected, now, MAX_COUNTED_OCCURRENCES);
  // Past the counting cap only the latest occurrences matter: read them back from `now`.
  const due = counted.truncated
    ? cron.latestUpTo(now, maxCatchup + Math.ceil(graceMs / 1000) + 1)
    : counted.instants;
  const total = counted.truncated ? MAX_COUNTED_OCCURRENCES : counted.instants.length;
  const onTimeFrom = now.getTime() - graceMs;
  const onTime = due.filter((d) => d.getTime() >= onTimeFrom);
  const late = due.filter((d) => d.getTime() < onTimeFrom);
  const missedCount = counted.truncated ? MAX_COUNTED_OCCURRENCES : total - onTime.length;
  const fires: PlannedFire[] = [];
  if (missedCount > 0 && policy === 'once') {
    const latest = late[late.length - 1];
    if (latest) fires.push({ at: latest, missed: missedCount });
  } else if (missedCount > 0 && policy === 'all') {
    const kept = late.slice(-maxCatchup);
    const dropped = missedCount - kept.length;
    kept.forEach((at, i) => fires.push({ at, missed: i === 0 ? dropped : 0 }));
  }
  for (const at of onTime) fires.push({ at, missed: 0 });
  return { fires, missed: missedCount, next };
}
