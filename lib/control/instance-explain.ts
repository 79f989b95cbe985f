import type { SqlExecutor } from '../db/sql-executor';
import { NoTargetError } from '../errors/no-target.error';
import type { ExplainReason, Explanation } from './explanation';
import { EXPLAIN_INSTANCE, type ExplainRecord } from '../sql/explain.sql';
import { type ResolvedTarget, targetLabel } from './target';

/** What only a node knows, for the reasons about this node (absent in a Nest-free client). */
export interface ExplainContext {
  /** Whether this node registers the FSM version (`fsm_not_registered` when not). */
  readonly registered?: (fsm: string, version: number) => boolean;
  /** Whether this node runs a scheduler of the queue (`queue_not_served` when not). */
  readonly serves?: (queue: string) => boolean;
  /** The gate and rate backend: `'redis'` keeps its counters out of PostgreSQL. */
  readonly limiter?: 'postgres' | 'redis';
  /**
   * What the instance deadline does to an instance of this FSM version (docs/operations-control.md
   * "Instance deadlines"): its `onDeadline` step (null: it is cancelled) and the grace of an
   * executing step, ms; undefined when this node does not register it.
   */
  readonly deadline?: (
    fsm: string,
    version: number,
  ) => { readonly onDeadline: string | null; readonly graceMs: number } | undefined;
}

const iso = (d: Date): string => d.toISOString();

/**
 * "Why isn't it running?" (docs/design.md §30; docs/dashboard-data.md): reads the row and what
 * it waits on in one statement (EXPLAIN_INSTANCE) and answers every reason that applies,
 * blocking ones first. `NoTargetError` when no instance answers the target. Nest-free: the
 * client calls it with no context (the node-local reasons are then left out).
 */
export async function explainInstance(
  sql: SqlExecutor,
  target: ResolvedTarget,
  context: ExplainContext = {},
): Promise<Explanation> {
  const record = await EXPLAIN_INSTANCE.run(sql, {
    id: 'id' in target ? target.id : null,
    correlationKey: 'id' in target ? null : target.correlationKey,
  });
  if (record === null) throw new NoTargetError(targetLabel(target));
  const reasons = reasonsOf(record, context);
  reasons.sort((a, b) => Number(b.blocking) - Number(a.blocking));
  return {
    id: record.id,
    fsm: record.fsm,
    version: record.version,
    status: record.status,
    step: record.step,
    queue: record.queue,
    at: record.now,
    reasons,
  };
}

/** The reasons of one read row (pure; exported for tests of the wording). */
export function reasonsOf(r: ExplainRecord, context: ExplainContext = {}): ExplainReason[] {
  const reasons: ExplainReason[] = [];
  const add = (
    code: ExplainReason['code'],
    blocking: boolean,
    text: string,
    details: ExplainReason['details'] = {},
  ): void => {
    reasons.push({ code, text, blocking, details });
  };
  const live = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'].includes(r.status);
  if (!live) {
    const why =
      r.status === 'cancelled'
        ? (r.cancelReason ?? r.lastError)
        : r.status === 'failed'
          ? r.lastError
          : null;
    add(
      'terminal',
      true,
      `it has ended: ${r.status}${why ? ` (${why})` : ''} at ${iso(r.updatedAt)}; retry or fork it to run it again`,
      { status: r.status, reason: why, at: r.updatedAt },
    );
    return reasons;
  }
  if (r.heldAt !== null) {
    add(
      'held',
      r.status === 'runnable',
      `it is held since ${iso(r.heldAt)}${r.heldReason ? ` (${r.heldReason})` : ''}: no node claims it until it is released; it still takes signals`,
      { heldAt: r.heldAt, reason: r.heldReason },
    );
  }
  if (r.deadlineAt !== null) deadlineReason(r, context, add);
  if (r.status === 'executing') {
    const expired = r.leaseExpiresAt !== null && r.leaseExpiresAt.getTime() < r.now.getTime();
    if (expired) {
      add(
        'lease_expired',
        true,
        `its lease held by ${r.lockedBy ?? 'an unknown worker'} expired at ${iso(r.leaseExpiresAt)}: the worker is gone or stalled, and the reaper's next sweep returns the row to runnable`,
        { owner: r.lockedBy, leaseExpiresAt: r.leaseExpiresAt },
      );
    } else {
      add(
        'executing',
        false,
        `step ${r.step} is running on ${r.lockedBy ?? 'an unknown worker'} (attempt ${r.attempt}), lease until ${r.leaseExpiresAt ? iso(r.leaseExpiresAt) : 'unknown'}`,
        { owner: r.lockedBy, leaseExpiresAt: r.leaseExpiresAt, attempt: r.attempt },
      );
    }
    if (r.cancelRequestedAt !== null) {
      add(
        'cancel_requested',
        false,
        `a cancel was requested at ${iso(r.cancelRequestedAt)}${r.cancelReason ? ` (${r.cancelReason})` : ''}: its owner ends it cancelled when the step returns`,
        { requestedAt: r.cancelRequestedAt, reason: r.cancelReason },
      );
    }
  }
  if (r.status === 'awaiting_signal') {
    const awaited = r.awaits ?? [];
    const waiting = r.inbox.filter((n) => !awaited.includes(n));
    add(
      'awaiting_signal',
      true,
      `it waits for a signal named ${awaited.map((n) => `"${n}"`).join(' or ') || '(none)'}${r.awaitDeadline ? ` until ${iso(r.awaitDeadline)}` : ''}; unconsumed in its inbox: ${r.inbox.length > 0 ? r.inbox.map((n) => `"${n}"`).join(', ') : 'nothing'}${waiting.length > 0 && waiting.length === r.inbox.length ? ' (none of them awaited)' : ''}`,
      { awaited, inbox: r.inbox, deadline: r.awaitDeadline },
    );
  }
  if (r.status === 'awaiting_children') {
    add(
      'awaiting_children',
      true,
      `it waits for ${r.childrenPending} child instance${r.childrenPending === 1 ? '' : 's'} to end`,
      { pending: r.childrenPending },
    );
  }
  if (r.status === 'runnable') runnableReasons(r, context, add);
  if (context.registered && !context.registered(r.fsm, r.version)) {
    add(
      'fsm_not_registered',
      r.status === 'runnable' && context.serves?.(r.queue) === true,
      `this node registers no FSM "${r.fsm}" version ${r.version}: a node that does must run it (a node without it that claims it fails the row as an unknown version)`,
      { fsm: r.fsm, version: r.version },
    );
  }
  if (context.serves && !context.serves(r.queue)) {
    add(
      'queue_not_served',
      false,
      `this node runs no scheduler of queue "${r.queue}": another node must run it`,
      { queue: r.queue },
    );
  }
  if (r.paused) {
    add(
      'queue_paused',
      r.status === 'runnable',
      `queue "${r.queue}" is paused since ${r.pausedAt ? iso(r.pausedAt) : '?'}${r.pauseReason ? ` (${r.pauseReason})` : ''}: no node claims from it until it is resumed`,
      { queue: r.queue, reason: r.pauseReason, pausedAt: r.pausedAt },
    );
  }
  return reasons;
}

type Add = (
  code: ExplainReason['code'],
  blocking: boolean,
  text: string,
  details?: ExplainReason['details'],
) => void;

/**
 * The instance deadline of a live row (docs/operations-control.md "Instance deadlines"): when,
 * whether it has passed, and what it does — moves the row to its FSM's `onDeadline` step, or
 * cancels it (an executing step asked to stop, fenced after the grace). Never blocking: it
 * ends the instance, it does not keep it from running. Without the FSM's declaration (a client,
 * a node that does not register it) the action is told as the FSM decides.
 */
function deadlineReason(r: ExplainRecord, context: ExplainContext, add: Add): void {
  const at = r.deadlineAt as Date;
  const ms = at.getTime() - r.now.getTime();
  const overdue = ms <= 0;
  const declared = context.deadline?.(r.fsm, r.version);
  const action =
    declared === undefined ? null : declared.onDeadline === null ? 'cancel' : 'onDeadline';
  const what =
    action === 'onDeadline'
      ? `it moves to step ${declared!.onDeadline}`
      : action === 'cancel'
        ? r.status === 'executing'
          ? `its running step is asked to stop and it is cancelled (fenced ${Math.round(declared!.graceMs / 1000)} s after the deadline if the step still runs)`
          : 'it is cancelled (children cascaded)'
        : "it is cancelled, or moved to its FSM's onDeadline step when the FSM declares one";
  const when = overdue
    ? `its deadline passed at ${iso(at)} (${Math.ceil(-ms / 1000)} s ago): the next deadline firing (a node's timer or the reaper's sweep) acts — ${what}`
    : `its deadline is ${iso(at)} (in ${Math.ceil(ms / 1000)} s): if it has not ended by then, ${what}`;
  add('deadline', false, when, {
    deadline: at,
    overdue,
    action,
    step: action === 'onDeadline' ? declared!.onDeadline : null,
    graceMs: declared?.graceMs ?? null,
  });
}

function runnableReasons(r: ExplainRecord, context: ExplainContext, add: Add): void {
  let blocked = false;
  if (r.eligibleAt.getTime() > r.now.getTime()) {
    blocked = true;
    const cause =
      r.attempt > 0 ? 'a retry backoff or a sleep' : 'a delayed insert, a retry backoff or a sleep';
    add(
      'not_yet_eligible',
      true,
      `it is runnable from ${iso(r.eligibleAt)} (in ${Math.ceil((r.eligibleAt.getTime() - r.now.getTime()) / 1000)} s): ${cause}`,
      { eligibleAt: r.eligibleAt },
    );
  }
  if (r.keyHolder !== null) {
    blocked = true;
    add(
      'concurrency_key_held',
      true,
      `its concurrency key "${r.concurrencyKey ?? ''}" is held by executing instance ${r.keyHolder}: one at a time per key`,
      { key: r.concurrencyKey, holder: r.keyHolder },
    );
  }
  const redis = context.limiter === 'redis';
  if (r.gated && !redis) {
    const full = (r.gateFree ?? 0) < 1;
    if (full) blocked = true;
    add(
      'gate_full',
      full,
      full
        ? `gate "${r.concurrencyKey ?? ''}" is full: ${r.gateHolders}/${r.gateLimit ?? '?'} slots held${r.gateHolderIds.length > 0 ? ` (by ${r.gateHolderIds.join(', ')})` : ''}`
        : `gate "${r.concurrencyKey ?? ''}" has ${r.gateFree ?? 0} of ${r.gateLimit ?? '?'} slots free`,
      {
        key: r.concurrencyKey,
        holders: r.gateHolders,
        limit: r.gateLimit,
        free: r.gateFree,
        holderIds: r.gateHolderIds,
      },
    );
  }
  if (r.rated && !redis) {
    const available = r.rateAvailable ?? 0;
    const empty = available + 1e-9 < r.weight;
    const rate = r.ratePerSecond ?? 0;
    const until =
      empty && rate > 0
        ? new Date(r.now.getTime() + Math.ceil(((r.weight - available) / rate) * 1000))
        : null;
    if (empty) blocked = true;
    add(
      'rate_limited',
      empty,
      empty
        ? `rate limit "${r.rateKey ?? ''}" has ${round(available)} of ${r.rateCapacity ?? '?'} tokens, the step needs ${r.weight}: ${until ? `enough from about ${iso(until)}` : 'it does not refill'}`
        : `rate limit "${r.rateKey ?? ''}" has ${round(available)} of ${r.rateCapacity ?? '?'} tokens (the step needs ${r.weight})`,
      {
        key: r.rateKey,
        available: round(available),
        capacity: r.rateCapacity,
        perSecond: r.ratePerSecond,
        weight: r.weight,
        until,
      },
    );
  }
  if (redis && (r.gated || r.rated)) {
    add(
      'limiter_unknown',
      false,
      `its ${r.gated ? `gate "${r.concurrencyKey ?? ''}"` : ''}${r.gated && r.rated ? ' and ' : ''}${r.rated ? `rate limit "${r.rateKey ?? ''}"` : ''} count in Redis (limiter: redis): their state is not read here`,
      { gateKey: r.gated ? r.concurrencyKey : null, rateKey: r.rated ? r.rateKey : null },
    );
  }
  if (!blocked && !r.paused) {
    add(
      'queued',
      false,
      `it is due and waits for a scheduler of queue "${r.queue}" to claim it: ${r.ahead >= 1000 ? 'at least 1000' : r.ahead} due row${r.ahead === 1 ? '' : 's'} ahead of it`,
      { ahead: r.ahead, aheadCapped: r.ahead >= 1000 },
    );
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
