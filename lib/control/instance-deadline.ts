import { DUE_INSTANCE_DEADLINES, ROUTE_DEADLINE } from '../sql/deadline.sql';
import { gateSlot, runCancel } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';

/** Most due deadlines one firing looks at; the rest wait for the next one. */
const BATCH = 1_000;

/** The reason and actor a deadline's cancel stores (docs/operations-control.md "Instance deadlines"). */
export const DEADLINE_ACTOR = 'deadline';

/** What one firing did: rows cancelled now, executing rows asked to stop, rows moved to `onDeadline`. */
export interface DeadlineFiring {
  readonly cancelled: number;
  readonly requested: number;
  readonly routed: number;
}

/**
 * Fires the instance deadlines that are due (docs/operations-control.md "Instance deadlines",
 * docs/design.md §27.7): DUE_INSTANCE_DEADLINES lists the live rows past their deadline whose
 * FSM this node knows; each is then, by its FSM's declaration and its status:
 * - with `onDeadline`: moved there by ROUTE_DEADLINE — at once when not executing; an executing
 *   row once its grace has passed, its claim fenced (within the grace it is left alone: its
 *   outcome may commit, and a later firing sees the row it left);
 * - else cancelled by the cancel of `cancel` (CANCEL_INSTANCES, cascade, reason and actor
 *   `deadline`): a row not executing now; an executing row cooperatively first (its owner's
 *   flush ends it `cancelled`, unless a terminal outcome commits first), fenced once its grace
 *   has passed.
 * Each action locks its row and checks it again, so a final outcome racing the deadline wins
 * or loses whole: the instance ends once. Any number of nodes may fire side by side (the
 * reaper's sweep, the local timers): a second action on a row finds it moved or ended.
 * `defaultGraceMs` is the module's `leaseTtl`. Emits `instance:deadline` when it acted.
 */
export async function fireInstanceDeadlines(
  runtime: ControlRuntime,
  defaultGraceMs: number,
): Promise<DeadlineFiring> {
  const fsms = [
    ...new Set(runtime.registry.all().flatMap((d) => (d.name !== undefined ? [d.name] : []))),
  ];
  const fired = { cancelled: 0, requested: 0, routed: 0 };
  if (fsms.length === 0) return fired;
  const due = await DUE_INSTANCE_DEADLINES.run(runtime.sql, { fsms, limit: BATCH });
  for (const row of due) {
    const definition = runtime.registry.find(row.fsm, row.fsmVersion);
    const graceMs = definition?.deadline?.graceMs ?? defaultGraceMs;
    const onDeadline = definition?.deadline?.onDeadline ?? null;
    const executing = row.status === 'executing';
    const graceOver = row.overdueMs >= graceMs;
    if (onDeadline !== null) {
      if (executing && !graceOver) continue;
      const routed = await ROUTE_DEADLINE.run(runtime.sql, {
        id: row.id,
        step: onDeadline,
        graceMs,
        record: definition?.history !== 'off',
      });
      if (!routed) continue;
      fired.routed++;
      const slot = routed.prior === 'executing' ? gateSlot(runtime, routed) : null;
      if (slot) void runtime.limiter.credit([slot]);
      runtime.pokes.poke([routed.queue]);
      continue;
    }
    if (executing && !graceOver && row.requested) continue;
    const result = await runCancel(runtime, {
      targetId: row.id,
      correlationKey: null,
      reason: DEADLINE_ACTOR,
      children: 'cascade',
      fence: executing && graceOver,
      descendantsOnly: false,
      onlyFsms: null,
      actor: DEADLINE_ACTOR,
    });
    if (result?.cancelled.includes(row.id)) fired.cancelled++;
    else if (result?.requested.includes(row.id)) fired.requested++;
  }
  if (fired.cancelled + fired.requested + fired.routed > 0) {
    runtime.telemetry.emit('instance:deadline', fired, {});
  }
  return fired;
}
