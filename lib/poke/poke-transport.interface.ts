import type { FinishedAnnouncement } from '../fsm/durable-event';

/** What a transport calls when another node announces runnable work (docs/design.md §16.4). */
export interface PokeListener {
  /** Another node announced runnable work in `queue`: poke the local scheduler, if any. */
  poke(queue: string): void;
  /**
   * The listening leg came back after an outage: announcements sent meanwhile were lost, so
   * poke every local scheduler once (cheaper than waiting for their backed-off polls).
   */
  resync(): void;
  /** The transport found it cannot deliver (e.g. LISTEN through a transaction pooler). */
  degraded(message: string): void;
  /** Another node announced instances that ended there (`announceFinished`, docs/events.md). */
  finished?(ended: readonly FinishedAnnouncement[]): void;
}

/**
 * The cross-node leg of pokes (docs/design.md §16.4): `'postgres'` (NOTIFY/LISTEN) or `{ redis }`
 * (PUBLISH/SUBSCRIBE). Best-effort by contract: nothing here ever throws into the engine; a
 * dead transport degrades every node to its poll and reconnects with backoff.
 */
export interface PokeTransport {
  /**
   * Opens the connections and subscribes. Resolves once the first attempt settled (connected
   * or not); never rejects — a failed attempt is retried in the background.
   */
  start(listener: PokeListener): Promise<void>;
  /** Announces runnable work in `queue` to the other nodes. Fire-and-forget; never throws. */
  publish(queue: string): void;
  /** Announces instances that ended on this node (`announceFinished`). Fire-and-forget; never throws. */
  publishFinished(ended: readonly FinishedAnnouncement[]): void;
  /** Whether the listening leg is subscribed right now. */
  readonly listening: boolean;
  /** Stops reconnecting, waits for announcements in flight and releases the connections. */
  close(): Promise<void>;
}
