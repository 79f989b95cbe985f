import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { sequenceKeyText } from '../fsm/sequence-policy';
import {
  BLOCKED_SEQUENCES,
  type BlockedSequenceRow,
  SKIP_SEQUENCE_HEAD,
} from '../sql/sequence.sql';
import type { StatementRunner } from '../sql/statement';
import type {
  BlockedSequence,
  SequenceHeadStatus,
  SkipSequenceHeadResult,
} from './blocked-sequence';
import type { ControlRuntime } from './control-runtime';
import { integerIn, optionsObject } from './input-checks';

/** The most keys one `blockedSequences` answers. */
const MAX_BLOCKED = 1_000;

/**
 * `blockedSequences({ limit?, key? })` (docs/sequences.md "Seeing held keys"): the keys with
 * instances waiting behind their head, the longest waiting first, by one BLOCKED_SEQUENCES.
 * `InvalidInputError` naming a bad option. Nest-free.
 */
export async function readBlockedSequences(
  sql: StatementRunner,
  options: unknown,
): Promise<BlockedSequence[]> {
  const o = optionsObject(options, ['limit', 'key'], 'blockedSequences.options', {
    nameKey: true,
  });
  const limit = integerIn(o?.['limit'], 'blockedSequences.limit', 100, 1, MAX_BLOCKED);
  const key = o?.['key'] === undefined ? null : sequenceKeyText(o['key'], 'blockedSequences.key');
  const rows = await BLOCKED_SEQUENCES.run(sql, { limit, key });
  return rows.map(blockedSequence);
}

function blockedSequence(r: BlockedSequenceRow): BlockedSequence {
  return {
    key: r.key,
    headId: r.headId,
    headStatus: headStatus(r),
    headStep: r.headStep,
    headError: r.headError,
    waiting: r.waiting,
    waitingSince: r.waitingSince,
  };
}

/** The head's status, refined for a runnable head (docs/sequences.md "Seeing held keys"). */
function headStatus(r: BlockedSequenceRow): SequenceHeadStatus {
  if (r.headStatus === 'done' || r.headStatus === 'cancelled') return 'runnable';
  if (r.headStatus !== 'runnable') return r.headStatus;
  if (r.headHeld) return 'held';
  if (r.headDue) return 'runnable';
  return r.headRan ? 'retrying' : 'scheduled';
}

/**
 * `skipSequenceHead(id)` (docs/sequences.md "When the head fails"): a failed instance with a
 * sequence key under `'block'` stops holding its key (its policy becomes `'skip'`), and its
 * queue is poked after commit so the next instance of the key runs. `changed` false when it
 * was already `'skip'`. `NoTargetError` for a missing id; `InvalidInputError` for an instance
 * without a key, or one that has not failed.
 */
export async function skipSequenceHead(
  runtime: ControlRuntime,
  id: string,
): Promise<SkipSequenceHeadResult> {
  const answer = await SKIP_SEQUENCE_HEAD.run(runtime.sql, { id });
  if (!answer) throw new NoTargetError(`#${id}`, 'no head was skipped');
  if (answer.sequenceKey === null) {
    throw new InvalidInputError(
      'skipSequenceHead.target',
      `${answer.fsm}#${answer.id} has no sequence key`,
    );
  }
  if (answer.status !== 'failed') {
    throw new InvalidInputError(
      'skipSequenceHead.target',
      `${answer.fsm}#${answer.id} is ${answer.status}: only a failed head is skipped (cancel a live one)`,
    );
  }
  if (answer.changed) runtime.pokes.poke([answer.queue]);
  return { id: answer.id, changed: answer.changed };
}
