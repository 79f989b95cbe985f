/** The least time a node waits to go quiet for a suspect before it gives the suspect up. */
const MIN_SOLO_WAIT_MS = 10_000;

/** What the solo run needs from each scheduler of the node. */
export interface SoloMember {
  /** Steps running and rows awaiting their commit on this queue. */
  readonly busyCount: number;
  /** A suspect holds the node: stop claiming and dispatching, release the buffered rows. */
  quiesce(): void;
  /** The solo run is over: claim and dispatch again. */
  resume(): void;
}

/** The suspect a member holds, and what to call when the node is quiet or gives up. */
interface Holder {
  readonly member: SoloMember;
  readonly id: string;
  /** The node is quiet: run the suspect's step now. */
  readonly start: (waitedMs: number) => void;
  /** The node did not go quiet in time: release the suspect. */
  readonly abandon: (waitedMs: number) => void;
  readonly since: number;
}

/**
 * The node-wide solo run of a poison-pill suspect (docs/design.md §26.5). A row that reached
 * `reaper.maxReaps` counted losses is a suspect: the losses may be its own kills, or pauses,
 * stalls and other rows' kills that took its worker while its step ran. The scheduler that
 * claims one holds it here; every scheduler of the node (all its queues) then stops claiming
 * and dispatching and releases its buffered rows, and once no step runs and no outcome awaits
 * its commit on the node, the suspect's step starts alone. Only a loss during that run fails
 * it (REAP_EXPIRED); when its outcome is answered, every scheduler resumes.
 *
 * One suspect at a time: another one claimed meanwhile is released (the caller does it). A
 * node whose in-flight work does not end within `max(leaseTtl, 10 s)` (a hung step) gives the
 * suspect up (released uncounted, still a suspect, for this or another node later) and for as
 * long again takes no other: the node is paused for that long at most, never for good.
 */
export class SoloRun {
  private readonly members = new Set<SoloMember>();
  private holder: Holder | undefined;
  private started = false;
  private timer: NodeJS.Timeout | undefined;
  private coolUntil = 0;
  readonly waitMs: number;

  constructor(leaseTtlMs: number) {
    this.waitMs = Math.max(leaseTtlMs, MIN_SOLO_WAIT_MS);
  }

  add(member: SoloMember): void {
    this.members.add(member);
  }

  /** True while a suspect holds the node: no member claims or dispatches other rows. */
  get active(): boolean {
    return this.holder !== undefined;
  }

  /** The id of the suspect holding the node, if any. */
  get suspectId(): string | undefined {
    return this.holder?.id;
  }

  /**
   * `member` claimed suspect `id`. False when the node cannot run it alone now (another
   * suspect holds it, or it gave one up lately): the caller releases it. Else every member
   * quiesces, and `start` runs once the node is quiet (at once if it is), or `abandon` after
   * {@link waitMs} if it never gets there.
   */
  begin(
    member: SoloMember,
    id: string,
    start: (waitedMs: number) => void,
    abandon: (waitedMs: number) => void,
  ): boolean {
    if (this.holder || Date.now() < this.coolUntil) return false;
    this.holder = { member, id, start, abandon, since: performance.now() };
    this.started = false;
    this.timer = setTimeout(() => this.giveUp(), this.waitMs);
    this.timer.unref();
    for (const m of this.members) m.quiesce();
    this.settled();
    return true;
  }

  /** A member's step or commit ended: starts the suspect once the whole node is quiet. */
  settled(): void {
    const holder = this.holder;
    if (!holder || this.started) return;
    for (const m of this.members) if (m.busyCount > 0) return;
    this.started = true;
    this.clearTimer();
    holder.start(performance.now() - holder.since);
  }

  /** The suspect's run is over (its outcome answered, or it was released): all resume. */
  end(member: SoloMember): void {
    if (this.holder?.member !== member) return;
    this.holder = undefined;
    this.started = false;
    this.clearTimer();
    for (const m of this.members) m.resume();
  }

  private giveUp(): void {
    this.timer = undefined;
    const holder = this.holder;
    if (!holder || this.started) return;
    this.coolUntil = Date.now() + this.waitMs;
    holder.abandon(performance.now() - holder.since);
    this.end(holder.member);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
