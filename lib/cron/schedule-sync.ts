import type { FsmRegistry } from '../discovery/fsm.registry';
import { ConfigurationError } from '../errors/configuration.error';
import {
  PRUNE_DECLARED_SCHEDULES,
  SCHEDULE_CLOCK,
  type ScheduleRow,
  UPSERT_DECLARED_SCHEDULES,
} from '../sql/cron.sql';
import type { StatementRunner } from '../sql/statement';
import type { ResolvedSchedule } from './resolved-schedule';

/** A resolved schedule as the upserts write it, its next fire the first occurrence after `now`. */
export function scheduleRow(s: ResolvedSchedule, now: Date): ScheduleRow {
  const next = s.expression.nextAfter(now);
  if (next === null) {
    throw new ConfigurationError(`schedule ${s.name}.cron`, 'has no occurrence after now');
  }
  return {
    name: s.name,
    fsm: s.fsm,
    cron: s.expression.expression,
    tz: s.expression.timeZone,
    nextFireAt: next,
    missed: s.missed,
    overlap: s.overlap,
    stateText: s.stateText,
    optionsText: JSON.stringify({
      maxCatchup: s.maxCatchup,
      queue: s.queue,
      priority: s.priority,
      stateFromFunction: s.stateFn !== undefined,
    }),
    hash: s.hash,
  };
}

/**
 * Boot (docs/design.md §29): upserts this node's `@DurableCron` schedules (a row is rewritten,
 * and its next fire recomputed from the database clock, only when its definition hash changed)
 * and, with `prune`, deletes the declared schedules of this node's FSMs that no class declares
 * now. Nothing runs when there is nothing to upsert or prune.
 */
export async function syncDeclaredSchedules(
  sql: StatementRunner,
  registry: FsmRegistry,
  prune: boolean,
): Promise<{ written: string[]; pruned: string[] }> {
  const declared = registry.declaredSchedules();
  if (declared.length === 0 && !prune) return { written: [], pruned: [] };
  let written: string[] = [];
  if (declared.length > 0) {
    const now = await SCHEDULE_CLOCK.run(sql);
    const rows = declared.map((s) => scheduleRow(s, now));
    written = await UPSERT_DECLARED_SCHEDULES.run(sql, { rows });
  }
  const pruned = prune
    ? await PRUNE_DECLARED_SCHEDULES.run(sql, {
        fsms: registry.names(),
        keep: declared.map((s) => s.name),
      })
    : [];
  return { written, pruned };
}
