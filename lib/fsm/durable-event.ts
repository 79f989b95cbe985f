/** What `@OnDurableEvent` listens for: an instance ending one way, or any step's outcome. */
export type DurableEventKind = 'done' | 'failed' | 'cancelled' | 'step';

/** The three ways an instance ends. */
export type FinishedStatus = 'done' | 'failed' | 'cancelled';

/**
 * One committed outcome, as `@OnDurableEvent` handlers receive it on the node that committed it
 * (docs/events.md). `step` events come for every committed step outcome; `done`, `failed` and
 * `cancelled` when the outcome ended the instance.
 */
export interface DurableEvent {
  readonly kind: DurableEventKind;
  readonly id: string;
  readonly fsm: string;
  /** The step whose outcome committed. */
  readonly step: string;
  /** The outcome the step returned (`next`, `retry`, `await`, `done`, `stop`, …), as committed. */
  readonly outcome: string;
  /** `done`: the instance's result, as stored. */
  readonly result?: unknown;
  /** `failed`, or a step that threw: the error's class and message (never a stack). */
  readonly error?: { readonly name: string; readonly message: string };
}

/**
 * An instance that ended, as `engine.finished$` carries it on every node (docs/events.md):
 * best effort — a node that was down or disconnected misses it; the row is the truth.
 */
export interface FinishedInstance {
  readonly id: string;
  readonly fsm: string;
  readonly step: string;
  readonly status: FinishedStatus;
  /** Whether this node committed it (`local`, with result or error) or heard of it (`remote`). */
  readonly origin: 'local' | 'remote';
  readonly result?: unknown;
  readonly error?: { readonly name: string; readonly message: string };
}

/** What a node tells the others about one instance that ended there (`announceFinished`). */
export type FinishedAnnouncement = Pick<FinishedInstance, 'id' | 'fsm' | 'step' | 'status'>;
