import type { KindsWrittenBy } from '../fsm/outcome-kinds';
import type { InsertRow } from '../instance/insert-row';
import type { LimitClosure, LimiterSlot } from '../limiter/limiter.interface';

/** A step's outcome, validated and serialized, ready for the flush transaction (docs/design.md §6.3). */
export type FlushEntry = TransitionEntry | ParkEntry | FanOutEntry;

interface EntryBase {
  readonly id: string;
  readonly seq: string;
  readonly worker: string;
  readonly queue: string;
  readonly fsm: string;
  readonly step: string;
  readonly parentId: string | null;
  /** Signal ids presented as `awaited` (consumed by next/scheduleChildren; excluded by the park recheck). */
  readonly awaitedIds: readonly string[];
  /** The gate slot the row holds, credited after this entry commits (docs/design.md §6.4); absent or null if none. */
  readonly slot?: LimiterSlot | null;
  /** The attempt of the step that ran (its history row's `attempt`); absent = unknown. */
  readonly attempt?: number;
  /** Whether the entry writes a history row when it commits (docs/design.md §28.1); absent = never. */
  readonly history?: HistoryMark;
  /** The step threw: its error as history keeps it, JSON `{ name, message, stack }` text. */
  readonly thrown?: string | null;
}

/**
 * Whether a committed entry writes a history row (docs/design.md §28.1), from its FSM's level
 * and its kind: 0 never (`'off'`); 1 only if the flush ends it `cancelled` (`'failures'`, an
 * outcome that is not itself a failure); 2 always; 3 always, with the committed state (`'full'`).
 */
export type HistoryMark = 0 | 1 | 2 | 3;

export interface TransitionEntry extends EntryBase {
  /** `continue` = the inline hand-off of a `next` that keeps the claim (docs/design.md §7). */
  readonly kind: KindsWrittenBy<'transition'>;
  readonly nextStep: string | null;
  readonly stateText: string | null;
  readonly resultText: string | null;
  readonly error: string | null;
  /** `retry`: the backoff; `throttle`: its `retryAfterMs`; `sleep` `{ for }`: the sleep, ms (database clock, from the commit). */
  readonly delayMs: number;
  /** `sleep` `{ until }`: the instant the row is due; null otherwise. */
  readonly at: Date | null;
  readonly rateLimit: string | null;
  readonly weight: number;
  readonly setKey: boolean;
  readonly concurrencyKey: string | null;
  /** `next` only: run the next step inline on the held claim (FSM default or the outcome's override). */
  readonly inline?: boolean;
  /** `throttle` only: the limits its commit closes (docs/design.md §16.5). */
  readonly closes?: readonly LimitClosure[];
  /** `continue` only: the renewed lease, ms. */
  readonly leaseMs?: number;
}

export interface ParkEntry extends EntryBase {
  readonly kind: KindsWrittenBy<'park'>;
  readonly nextStep: string;
  readonly stateText: string;
  readonly names: readonly string[];
  readonly timeoutMs: number | null;
}

export interface FanOutEntry extends EntryBase {
  readonly kind: KindsWrittenBy<'fanOut'>;
  readonly nextStep: string;
  readonly stateText: string;
  readonly children: readonly InsertRow[];
}

/**
 * How long after its commit a transition's row is due, ms, on this node's clock: its delay,
 * or the time left until its `at` (≤ 0 = due now). Picks the local wake-up and whether the
 * commit pokes (docs/design.md §27.4); the database clock decides when the row is claimable.
 */
export function dueInMs(entry: TransitionEntry): number {
  return entry.at === null ? entry.delayMs : entry.at.getTime() - Date.now();
}

/**
 * What the flusher answers each entry: `cancelled` = committed, but as `cancelled` instead of
 * its own kind (a cancel was requested while its step ran, docs/design.md §27.2).
 */
export type FlushReply = 'committed' | 'cancelled' | 'stale' | 'error';
