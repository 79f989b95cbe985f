import { assertNever } from '../fsm/outcome-kinds';
import { type DurableStatus, isTerminalStatus } from '../gen-durable.constants';
import type { AwaitResult, InstanceView } from './instance-view';

/** When `await` answers (docs/design.md §9): `settled` also on a parked row, `terminal` only on an ended one. */
export type AwaitUntil = 'settled' | 'terminal';

/** Whether a row in `status` answers an `await` waiting `until` (docs/design.md §9). */
export function awaitSettles(status: DurableStatus, until: AwaitUntil): boolean {
  if (isTerminalStatus(status)) return true;
  return until === 'settled' && (status === 'awaiting_signal' || status === 'awaiting_children');
}

/**
 * What `await` answers for one read of the row (docs/design.md §9, §27.1): `not_found` for no
 * row, the outcome of an ended row, `awaiting` for a parked row when waiting for `settled`,
 * else `busy` with the row's snapshot (not settled yet: wait on, and answer it at the
 * deadline). Every face's `await` answers through it.
 */
export function awaitAnswer(row: InstanceView | null, until: AwaitUntil): AwaitResult {
  if (row === null) return { kind: 'not_found' };
  const status = row.status;
  switch (status) {
    case 'done':
      return { kind: 'done', result: row.result ?? {} };
    case 'failed':
      return { kind: 'failed', error: row.lastError ?? '' };
    case 'cancelled':
      return { kind: 'cancelled', reason: row.cancelReason };
    case 'runnable':
    case 'executing':
    case 'awaiting_signal':
    case 'awaiting_children':
      return {
        kind: awaitSettles(status, until) ? 'awaiting' : 'busy',
        snapshot: { status, step: row.step, attempt: row.attempt },
      };
    default:
      return assertNever(status, 'status');
  }
}
