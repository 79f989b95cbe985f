import type { Telemetry } from '../telemetry/telemetry';
import { ClaimLoop, type ClaimHost } from './claim-loop';
import type { ClaimBuffer } from './claim-buffer';
import type { ClaimedRow } from './claimed-row';
import type { ExecutionResult } from './executor';
import type { Picker } from './picker';
import type { PrefetchPolicy } from './prefetch-policy';
import type { LeaseKeeper } from './lease-keeper';
import type { QueuePause } from './queue-pause';
import type { SchedulerParts } from './scheduler-parts';
import type { SoloRun } from './solo-run';
import type { LaunchListener, StepLauncher } from './step-launcher';
import type { StepSlots } from './step-slots';
import type { SuspectHold, SuspectHost } from './suspect-hold';

export type SchedulerState = 'created' | 'running' | 'draining' | 'stopped';

/**
 * One queue's loop on this node (docs/design.md §5): claim → buffer → at most `concurrency`
 * steps running → outcomes awaiting commit → heartbeat → drain. At most one pick at a time;
 * freed slots refill; pokes wake a scheduler with free slots at once (leading edge) and
 * coalesce within 10 ms.
 *
 * A slot is a running step: a row whose step returned is handed to the flusher and frees its
 * slot at once, but stays held (heartbeated, waited for by the drain, never dispatched twice —
 * docs/design.md §26.1) until its flush answers. Nothing that depends on the outcome proceeds
 * before that commit: the row stays `executing` until then, so its next step, waiters,
 * children, K = 1 key and gate slot all wait for it. Backpressure: a step is dispatched only
 * while running steps and rows awaiting commit are fewer than `2 × concurrency + prefetch`; at
 * that bound the scheduler neither dispatches nor claims until the flusher answers, so a node
 * holds at most `3 × concurrency + 2 × prefetch` rows of a queue however slow PostgreSQL is
 * (the buffer and running steps within `concurrency + prefetch`, the rest awaiting commit).
 *
 * A claimed poison-pill suspect (docs/design.md §26.5) is held apart and run alone on the node
 * through {@link SoloRun}: meanwhile no scheduler of the node claims or dispatches.
 *
 * Its collaborators come built ({@link buildScheduler}): {@link LeaseKeeper} keeps the claims
 * (worker id, startup reclaim, heartbeat), {@link PrefetchPolicy} sizes the claims,
 * {@link StepSlots} counts running steps and rows awaiting commit, {@link ClaimBuffer} holds
 * claimed rows until a slot frees and releases them, {@link StepLauncher} runs a row's steps,
 * {@link SuspectHold} holds a suspect apart, {@link QueuePause} tracks the fleet-wide pause. Its
 * own {@link ClaimLoop} decides when to claim; the scheduler decides what runs.
 */
export class Scheduler implements SuspectHost, ClaimHost {
  readonly queue: string;
  readonly concurrency: number;
  private state: SchedulerState = 'created';
  /** Claimed rows waiting for a slot, and their ways back to runnable. */
  private readonly buffer: ClaimBuffer;
  /** Slots reserved for rows being inserted claimed (docs/design.md §5.5.1). */
  private insertsReserved = 0;
  /** Epoch ms of the last loop activity (health, §21). */
  lastActivityAt = 0;

  private readonly drainTimeoutMs: number;
  private readonly launcher: StepLauncher;
  private readonly picker: Picker;
  private readonly loop: ClaimLoop;
  private readonly telemetry: Telemetry;
  private readonly solo: SoloRun;
  /** Keeps this queue's claims: heartbeat, early progress writes, reclaims (§17.3, §28.2). */
  readonly lease: LeaseKeeper;
  private readonly policy: PrefetchPolicy;
  private readonly slots: StepSlots;
  private readonly suspects: SuspectHold;
  private readonly pause: QueuePause;

  constructor(parts: SchedulerParts) {
    this.queue = parts.queue;
    this.drainTimeoutMs = parts.options.drainTimeout;
    this.launcher = parts.launcher;
    this.picker = parts.picker;
    this.telemetry = parts.telemetry;
    this.solo = parts.solo;
    this.lease = parts.lease;
    this.policy = parts.prefetch;
    this.slots = parts.slots;
    this.suspects = parts.suspects;
    this.pause = parts.pause;
    this.buffer = parts.buffer;
    this.concurrency = parts.slots.concurrency;
    this.loop = new ClaimLoop(this, parts.picker, parts.options, parts.telemetry, parts.floor);
    parts.solo.add(this);
  }

  get workerId(): string {
    return this.lease.workerId;
  }

  /** Worker ids of this queue on this node share it; startup reclaim matches it (§17.3). */
  get reclaimPrefix(): string {
    return this.lease.reclaimPrefix;
  }

  /** Epoch ms of the last successful heartbeat (health, §21). */
  get lastHeartbeatAt(): number {
    return this.lease.lastHeartbeatAt;
  }

  /** The backpressure bound on rows awaiting commit ({@link StepSlots.maxAwaitingCommit}). */
  get maxAwaitingCommit(): number {
    return this.slots.maxAwaitingCommit;
  }

  get status(): SchedulerState {
    return this.state;
  }

  /** Steps running now (what `concurrency` bounds), abandoned ones past their timeout included. */
  get inFlightCount(): number {
    return this.slots.inFlight;
  }

  /** Rows whose step returned and whose outcome awaits its commit. */
  get awaitingCommitCount(): number {
    return this.slots.awaitingCommit;
  }

  get bufferedCount(): number {
    return this.buffer.length;
  }

  /** Steps running and rows awaiting commit (what a solo run waits for, §26.5). */
  get busyCount(): number {
    return this.slots.busy;
  }

  /** The queue is paused fleet-wide, as this scheduler last learned it (docs/design.md §27.6). */
  get paused(): boolean {
    return this.pause.paused;
  }

  /** The prefetch now (docs/operations.md, "prefetch"). */
  prefetch(): number {
    return this.policy.prefetch();
  }

  isRunning(): boolean {
    return this.state === 'running';
  }

  /** Reclaims a dead predecessor's claims, then starts polling and heartbeating. */
  async start(): Promise<void> {
    if (this.state !== 'created') return;
    this.state = 'running';
    this.lastActivityAt = Date.now();
    await this.lease.start(() => this.held());
    this.loop.schedulePoll(0);
  }

  /**
   * A row of this queue was inserted on this node, runnable and due, at `priority`, eligible at
   * `at` (null: the insert's now): the claim floor goes back to it if it stands before the floor
   * ({@link ClaimFloor.inserted}). Called before the queue is poked.
   */
  insertedDue(priority: number, at: Date | null): void {
    this.loop.floor.inserted(priority, at);
  }

  /**
   * Whether a row about to be inserted on this node may be written already claimed by this
   * scheduler and start at once (docs/design.md §5.5.1 "Inserted claimed"): the queue runs, is
   * neither paused (as last learned) nor fair, no suspect holds the node, nothing is buffered,
   * the last pick left nothing behind, and a slot is free beyond those already reserved. True reserves that slot ({@link demand} counts it) until
   * {@link takeInserted} or {@link cancelInserted}.
   */
  reserveInserted(): boolean {
    if (this.state !== 'running' || this.pause.paused || this.solo.active) return false;
    if (this.suspects.holding || this.slots.backpressured() || this.buffer.length > 0) return false;
    if (this.picker.isFair(this.queue) || !this.loop.drained) return false;
    if (this.slots.inFlight + this.insertsReserved >= this.concurrency) return false;
    this.insertsReserved += 1;
    return true;
  }

  /** A reserved slot whose insert wrote no claimed row (a duplicate, a paused queue, an error). */
  cancelInserted(): void {
    this.insertsReserved -= 1;
  }

  /**
   * The row a reserved slot's insert wrote claimed by this scheduler: it starts now, ahead of
   * anything buffered since; a scheduler no longer running, or quiet for a suspect's solo run
   * (§26.5), gives it back (runnable, poked).
   */
  takeInserted(row: ClaimedRow): void {
    this.insertsReserved -= 1;
    if (this.state !== 'running' || this.solo.active) {
      void this.buffer.giveBack([row]);
      return;
    }
    this.lastActivityAt = Date.now();
    row.insertedClaimed = true;
    this.buffer.putFirst(row);
    this.dispatch();
  }

  /** A poke: runnable work may exist (docs/design.md §5.5; {@link ClaimLoop.poke}). */
  poke(): void {
    this.loop.poke();
  }

  /**
   * docs/design.md §5.2: `concurrency + prefetch − (running + buffer)`; 0 while the rows
   * awaiting commit are at their bound (backpressure).
   */
  demand(): number {
    if (this.slots.backpressured() || this.solo.active) return 0;
    return (
      this.concurrency +
      this.policy.prefetch() -
      this.fairReserve() -
      (this.slots.inFlight + this.buffer.length + this.insertsReserved)
    );
  }

  /**
   * A fair queue's refills leave {@link PrefetchPolicy.pokeReserve} rows of its capacity to
   * claims started by pokes (docs/many-tenants.md "Prefetch on a fair queue"); 0 on a plain queue.
   */
  private fairReserve(): number {
    return this.picker.isFair(this.queue) ? this.policy.pokeReserve() : 0;
  }

  pokeReserve(): number {
    if (this.slots.backpressured() || this.solo.active) return 0;
    return this.fairReserve();
  }

  /**
   * Graceful drain (docs/design.md §17.4): stop claiming, release the buffer, wait up to
   * `drainTimeout` for running steps and for rows awaiting commit (all still heartbeated),
   * then stop. `scheduler:drain`'s `inFlight` counts both.
   */
  async drain(): Promise<void> {
    if (this.state !== 'running') {
      this.lease.stop();
      this.state = 'stopped';
      return;
    }
    this.state = 'draining';
    await this.loop.stop();
    await this.buffer.settled();
    // A suspect not yet started goes back with the buffer (uncounted: its step never ran).
    const suspect = this.suspects.takeUnstarted(this);
    if (suspect) this.buffer.putLast(suspect);
    const released = await this.buffer.releaseAll('');
    const inFlight = this.slots.tasks().length;
    this.telemetry.emit('scheduler:drain', { released, inFlight }, { queue: this.queue });
    if (inFlight > 0 && !(await this.slots.settleWithin(this.drainTimeoutMs))) {
      this.launcher.abortOnDrainTimeout(this.slots.runningRows(), this.drainTimeoutMs);
    }
    this.lease.stop();
    this.state = 'stopped';
  }

  // ClaimHost: what the claim loop asks.

  capacity(): number {
    return this.concurrency + this.policy.prefetch();
  }

  minDemand(): number {
    return this.policy.minDemand();
  }

  idle(): boolean {
    return this.slots.inFlight === 0 && this.buffer.length === 0;
  }

  holding(): boolean {
    return this.suspects.holding || this.slots.any || this.buffer.length > 0;
  }

  learnPause(paused: boolean): Promise<void> {
    return this.pause.learn(paused, () => this.buffer.releaseAll('paused '));
  }

  touched(): void {
    this.lastActivityAt = Date.now();
  }

  async accept(rows: ClaimedRow[]): Promise<boolean> {
    const runnable = await this.suspects.setApart(this, rows);
    if (runnable.length === 0) return false;
    this.buffer.add(runnable, this.picker.isFair(this.queue));
    this.dispatch();
    return true;
  }

  async ticked(claimed: boolean): Promise<void> {
    // Paused on purpose for a suspect's solo run (§26.5): alive, not stalled (health, §21).
    if (this.solo.active) this.lastActivityAt = Date.now();
    if (!claimed && this.buffer.length > 0) {
      await this.pause.probe(() => this.buffer.releaseAll('paused '));
    }
    this.telemetry.emit(
      'scheduler:saturation',
      {
        inFlight: this.slots.inFlight,
        awaitingCommit: this.slots.awaitingCommit,
        buffer: this.buffer.length,
        concurrency: this.concurrency,
        prefetch: this.policy.prefetch(),
      },
      { queue: this.queue },
    );
  }

  private dispatch(): void {
    if (this.solo.active) return;
    const fair = this.picker.isFair(this.queue);
    const kept = fair ? this.policy.newKeySlots() : 0;
    while (!this.pause.paused && this.slots.canStart() && this.state === 'running') {
      // Only the slots kept for new keys are free: only a row whose key runs nothing may start
      // (docs/many-tenants.md "A slot for new keys"); never a second task for an id still held.
      const newKeysOnly = kept > 0 && this.concurrency - this.slots.inFlight <= kept;
      const row = this.buffer.take(this.slots, newKeysOnly);
      if (!row) return;
      // Inline chains (docs/design.md §7) run while the queue runs; draining ends them at the
      // next step, and so does a suspect's solo run (§26.5), which waits for them. A chain keeps
      // its slot through its continue commits: only its last outcome frees it.
      this.startTask(row, this.chaining, fair);
    }
  }

  private readonly chaining = (): boolean =>
    this.state === 'running' && !this.solo.active && !this.pause.paused;

  /** The suspect's step, alone on the node: no inline chain (§26.5). */
  startAlone(row: ClaimedRow): void {
    this.startTask(row, () => false, this.picker.isFair(this.queue));
  }

  /** Starts the row's steps; on a fair queue its key counts as running ({@link StepSlots.start}). */
  private startTask(row: ClaimedRow, chain: () => boolean, countKey: boolean): void {
    this.slots.start(this.launcher.launch(row, chain, this.listener), countKey);
  }

  private readonly listener: LaunchListener = {
    stepsDone: (id) => this.stepsDone(id),
    abandoned: (settled) =>
      this.slots.abandon(settled, () => {
        this.solo.settled();
        this.slotFreed();
      }),
    completed: (id, kind) => this.completed(id, kind),
  };

  /** Releases `rows` to runnable and pokes their queue so another node may run them. */
  giveBack(rows: readonly ClaimedRow[]): Promise<void> {
    return this.buffer.giveBack(rows);
  }

  /** A suspect holds the node (§26.5): nothing is claimed or dispatched; the buffer goes back. */
  quiesce(): void {
    this.loop.closePokeWindow();
    this.buffer.giveAllBack();
  }

  /** The solo run is over: claim and dispatch again, from a fresh poll. */
  resume(): void {
    if (this.state !== 'running') return;
    this.dispatch();
    this.loop.restart();
  }

  /** The row's last step returned and its outcome went to the flusher: its slot is free. */
  private stepsDone(id: string): void {
    const quiet = this.slots.rowOf(id)?.insertedClaimed === true;
    const ms = this.slots.returned(id);
    if (ms === undefined) return;
    this.policy.recordStep(ms);
    this.slotFreed(quiet);
    this.shedPrefetch();
  }

  /** Sheds the buffer when the prefetch policy says so ({@link PrefetchPolicy.shouldShed}). */
  private shedPrefetch(): void {
    if (this.state !== 'running') return;
    if (this.policy.shouldShed(this.slots.inFlight, this.buffer.length)) this.buffer.shed();
  }

  /** The executor is done with the row: its flush answered, or it took the crash path. */
  private completed(id: string, kind: ExecutionResult['kind']): void {
    if (this.suspects.isRunning(id)) {
      this.slots.finish(id);
      this.lastActivityAt = Date.now();
      this.suspects.end(this);
      return;
    }
    const wasBackpressured = this.slots.backpressured();
    const where = this.slots.finish(id);
    if (where === 'running') {
      this.solo.settled();
      this.slotFreed();
      return;
    }
    if (where === undefined) return;
    this.solo.settled();
    this.lastActivityAt = Date.now();
    if (this.state !== 'running') return;
    // The buffer may hold this id again (re-claimed after its commit): it may run now.
    this.dispatch();
    // Refill when the bound held claims back, or when the committed row may be runnable again
    // (found even when pokes are off).
    if (
      (wasBackpressured ||
        kind === 'next' ||
        kind === 'retry' ||
        kind === 'throttle' ||
        kind === 'sleep') &&
      this.refillDue()
    ) {
      this.loop.scheduleRefill();
    }
  }

  /**
   * A slot is free: dispatch, then refill when due. Not for a `quiet` row (inserted claimed: it
   * unblocks nothing) of a drained queue: new work pokes its own claim, due rows their wake-ups.
   */
  private slotFreed(quiet = false): void {
    this.lastActivityAt = Date.now();
    if (this.state !== 'running') return;
    this.dispatch();
    if (quiet && this.loop.drained && this.buffer.length === 0 && !this.loop.pokeOwed()) return;
    if (this.refillDue() || this.loop.pokeOwed()) this.loop.scheduleRefill();
  }

  /**
   * A refill is due once the buffer is empty or, while the queue prefetches, once `minDemand`
   * rows are wanted: the next claim is then in flight while the buffered rows still run, so a
   * claim's round trip and commit overlap the steps instead of following them.
   */
  refillDue(): boolean {
    if (this.pause.paused) return false;
    if (this.buffer.length === 0) return true;
    return this.policy.prefetch() > 0 && this.demand() >= this.policy.minDemand();
  }

  private held(): ClaimedRow[] {
    const rows = this.buffer.snapshot();
    // Held apart until its step starts (a stale task of the same id may still be running).
    const suspect = this.suspects.unstarted;
    if (suspect) rows.push(suspect);
    return rows.concat(this.slots.rows());
  }
}
