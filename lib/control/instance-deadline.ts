import { type DueDeadline, DUE_INSTANCE_DEADLINES, ROUTE_DEADLINE } from '../sql/deadline.sql';
import { gateSlot, runCancel } from './cancel-instance';
import type { ControlRuntime } from './control-runtime';

/** Due deadlines one page of a firing reads. */
const BATCH = 1_000;
/**
 * Pages one firing reads at most while full pages come back (docs/operations-control.md
 * "Instance deadlines"): a backlog of up to `BATCH × MAX_PAGES` due rows is handled by one
 * firing; a larger one by the next firings, which a full last page schedules at once.
 */
export const MAX_DEADLINE_PAGES = 10;

/** The reason and actor a deadline's cancel stores (docs/operations-control.md "Instance deadlines"). */
export const DEADLINE_ACTOR = 'deadline';

/**
 * What one firing did: rows cancelled now, executing rows asked to stop, rows moved to
 * `onDeadline`; `more` when it stopped at `MAX_DEADLINE_PAGES` full pages (more may be due).
 */
export interface DeadlineFiring {
  readonly cancelled: number;
  readonly requested: number;
  readonly routed: number;
  readonly more: boolean;
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
 * `defaultGraceMs` is the module's `leaseTtl`. Reads pages of `BATCH` rows by a keyset
 * cursor (a row left alone is not read again) while full pages come back, at most
 * `MAX_DEADLINE_PAGES`. Emits `instance:deadline` when it acted.
 */
export async function fireInstanceDeadlines(
  runtime: ControlRuntime,
  defaultGraceMs: number,
): Promise<DeadlineFiring> {
  const fsms = [
    ...new Set(runtime.registry.all().flatMap((d) => (d.name !== undefined ? [d.name] : []))),
  ];
  const fired = { cancelled: 0, requested: 0, routed: 0, more: false };
  if (fsms.length === 0) return fired;
  let after: DueDeadline | null = null;
  for (let page = 1; ; page++) {
    const due = await DUE_INSTANCE_DEADLINES.run(runtime.sql, { fsms, limit: BATCH, after });
    for (const row of due) await fireOne(runtime, defaultGraceMs, row, fired);
    if (due.length < BATCH) break;
    if (page >= MAX_DEADLINE_PAGES) {
      fired.more = true;
      break;
    }
    after = due[due.length - 1]!;
  }
  if (fired.cancelled + fired.requested + fired.routed > 0) {
    const { cancelled, requested, routed } = fired;
    runtime.telemetry.emit('instance:deadline', { cancelled, requested, routed }, {});
  }
  return fired;
}

/** Fires one due deadline (see {@link fireInstanceDeadlines}), counting what it did in `fired`. */
async function fireOne(
  runtime: ControlRuntime,
  defaultGraceMs: number,
  row: DueDeadline,
  fired: { cancelled: number; requested: number; routed: number },
): Promise<void> {
  const definition = runtime.registry.find(row.fsm, row.fsmVersion);
  const graceMs = definition?.deadline?.graceMs ?? defaultGraceMs;
  const onDeadline = definition?.deadline?.onDeadline ?? null;
  const executing = row.status === 'executing';
  const graceOver = row.overdueMs >= graceMs;
  if (onDeadline !== null) {
    if (executing && !graceOver) return;
    const routed = await ROUTE_DEADLINE.run(runtime.sql, {
      id: row.id,
      step: onDeadline,
      graceMs,
      record: definition?.history !== 'off',
    });
    if (!routed) return;
    fired.routed++;
    const slot = routed.prior === 'executing' ? gateSlot(runtime, routed) : null;
    if (slot) void runtime.limiter.credit([slot]);
    runtime.pokes.poke([routed.queue]);
    return;
  }
  if (executing && !graceOver && row.requested) return;
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
