import type { InstanceView } from '../instance/instance-view';
import type { QueueStatus } from '../instance/queue-status';
import type { InboxSignal } from '../sql/dashboard.sql';

/** One reason an instance is not running now. */
export interface ExplanationReason {
  readonly code: string;
  readonly message: string;
}

/** "Why isn't it running?" as the dashboard can tell from the row alone. */
export interface BasicExplanation {
  readonly summary: string;
  readonly reasons: readonly ExplanationReason[];
}

/**
 * The row's own answer to "why isn't it running?" (docs/design.md §30), for an engine without
 * `explain`: a future `eligibleAt`, awaited names against the pending inbox, pending children,
 * a running or expired lease, a paused queue, an FSM this node does not run, and the limits
 * that may hold it (concurrency key, rate limit) — without their live state.
 */
export function basicExplanation(
  i: InstanceView,
  inbox: readonly InboxSignal[],
  queue: QueueStatus | undefined,
  registered: boolean,
  now = new Date(),
): BasicExplanation {
  const reasons: ExplanationReason[] = [];
  const add = (code: string, message: string) => reasons.push({ code, message });
  if (i.status === 'executing') {
    if (i.leaseExpiresAt && i.leaseExpiresAt < now) {
      add(
        'lease_expired',
        `its lease expired at ${i.leaseExpiresAt.toISOString()}: the reaper will make it runnable again`,
      );
    } else {
      add(
        'executing',
        `it is running on ${i.lockedBy ?? 'a node'} (lease until ${i.leaseExpiresAt?.toISOString() ?? '?'})`,
      );
    }
  }
  if (i.status === 'awaiting_signal') {
    const pending = new Set(inbox.filter((s) => s.consumedAt === null).map((s) => s.name));
    const names = i.awaits ?? [];
    const missing = names.filter((n) => !pending.has(n));
    add(
      'awaiting_signal',
      `it waits for signal ${names.join(' or ')}; pending in its inbox: ${pending.size === 0 ? 'none' : [...pending].join(', ')}${missing.length < names.length ? ' (an awaited one is there: it wakes at the next pick)' : ''}`,
    );
    if (i.awaitDeadline) {
      add('await_deadline', `it wakes anyway at ${i.awaitDeadline.toISOString()}`);
    }
  }
  if (i.status === 'awaiting_children') {
    add('awaiting_children', `${i.childrenPending} child(ren) still pending`);
  }
  if (i.status === 'runnable') {
    if (i.eligibleAt > now) add('not_due', `not due until ${i.eligibleAt.toISOString()}`);
    if (queue?.paused) {
      add('queue_paused', `queue ${i.queue} is paused${queue.reason ? ` (${queue.reason})` : ''}`);
    }
    if (!registered) {
      add('unregistered_fsm', `FSM ${i.fsm} v${i.fsmVersion} is not registered on this node`);
    }
    if (queue && !queue.served) {
      add('queue_not_served_here', `this node runs no scheduler for queue ${i.queue}`);
    }
    if (i.concurrencyKey) {
      add(
        'concurrency_key',
        `concurrency key ${i.concurrencyKey}: it runs when a slot of that key is free`,
      );
    }
    if (i.rateLimit) {
      add(
        'rate_limit',
        `rate limit ${i.rateLimit}: it runs when the bucket has ${i.weight} token(s)`,
      );
    }
    if (reasons.length === 0) add('due', `due now: the next pick of queue ${i.queue} takes it`);
  }
  const summary = reasons.length === 0 ? `it is ${i.status}` : reasons[0]!.message;
  return { summary, reasons };
}
