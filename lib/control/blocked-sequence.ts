import type { DurableStatus } from '../gen-durable.constants';

/**
 * Why a key's head holds it (docs/sequences.md "Seeing held keys"): its status, refined for a
 * runnable head — `'held'` (held), `'retrying'` (not yet due after a retry or a reap),
 * `'scheduled'` (not yet due, never run), else `'runnable'`.
 */
export type SequenceHeadStatus =
  Exclude<DurableStatus, 'done' | 'cancelled'> | 'held' | 'retrying' | 'scheduled';

/** One key with instances waiting behind its head (`blockedSequences`). */
export interface BlockedSequence {
  /** The sequence key. */
  readonly key: string;
  /** The id of its head: the oldest instance that holds the key. */
  readonly headId: string;
  readonly headStatus: SequenceHeadStatus;
  /** The head's current step. */
  readonly headStep: string;
  /** The head's last error, or null. */
  readonly headError: string | null;
  /** Instances of the key behind the head. */
  readonly waiting: number;
  /** When the oldest of them was inserted. */
  readonly waitingSince: Date;
}

/** Options of `blockedSequences`. */
export interface BlockedSequencesOptions {
  /** At most this many keys, 1 … 1 000. Default `100`. */
  readonly limit?: number;
  /** Only this key. Default: every key. */
  readonly key?: string;
}

/** What `skipSequenceHead` did: `changed` false when the instance was already `'skip'`. */
export interface SkipSequenceHeadResult {
  readonly id: string;
  readonly changed: boolean;
}
