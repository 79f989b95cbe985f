import { retryWhileUnreachable } from '../db/retry-while-unreachable';
import { randomBytes } from 'node:crypto';

import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import { DrainTimeoutError } from '../errors/drain-timeout.error';
import { LeaseLostError } from '../errors/lease-lost.error';
import { StepCancelledError } from '../errors/step-cancelled.error';
import type { ResolvedOptions } from '../options/resolved-options';
import {
  type CancelledClaim,
  CLEAR_STEP_STARTED,
  HEARTBEAT,
  type HeldClaim,
  MARK_STEP_STARTED,
  RECLAIM_PREDECESSOR,
} from '../sql/lease.sql';
import { READ_QUEUE_PAUSE } from '../sql/queue.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';
import type { ExecutionResult, Executor } from './executor';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import type { Picker } from './picker';
import type { SoloMember, SoloRun } from './solo-run';

export type SchedulerState = 'created' | 'running' | 'draining' | 'stopped';

const POKE_DEBOUNCE_MS = 10;
/** The poison-pill cap a node without a reaper assumes for its startup reclaim (docs/design.md §26.5 default). */
const DEFAULT_MAX_REAPS = 5;

/**
 * `prefetch: 'auto'`: a queue whose recent steps average under this many ms prefetches (its
 * claim latency is then a large share of a step); one of longer steps does not (prefetched rows
 * would wait behind them, hidden from other nodes, for nothing).
 */
const AUTO_PREFETCH_STEP_MS = 50;
/** `prefetch: 'auto'` while steps are short: running + prefetched = max(200, 4 × concurrency). */
const AUTO_CAPACITY_MIN = 200;
const AUTO_CAPACITY_PER_SLOT = 4;
/**
 * `prefetch: 'auto'` while steps average under this many ms (trivial steps): running +
 * prefetched = max(800, 4 × concurrency). The claim round trip is then most of a row's cost,
 * and a buffer of 800 such steps is at most 800 × 2 ms / concurrency of work (160 ms at 10 slots).
 */
const AUTO_FAST_STEP_MS = 2;
const AUTO_FAST_CAPACITY_MIN = 800;
/** Weight of the newest step in the moving average of step durations. */
const STEP_AVERAGE_WEIGHT = 0.2;

/** A held row the executor has: its step running, or its outcome awaiting commit. */
interface Task {
  readonly row: ClaimedRow;
  /** performance.now() at dispatch. */
  readonly startedAt: number;
  /** Settles once the executor is done with the row (its flush answered, or the crash path). */
  readonly done: Promise<void>;
}

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
 * NOTE: a step that ran past its timeout (docs/design.md §27.5) is routed as a
 * `StepTimeoutError` and its row moves on to awaiting commit like any other, but its promise
 * may still be running: such an abandoned step keeps counting against `concurrency` until it
 * settles, so `concurrency` still bounds the step code running on this node. Its row is not
 * held: the drain does not wait for it.
 *
 * A claimed poison-pill suspect (docs/design.md §26.5) is held apart and run alone on the node
 * through {@link SoloRun}: meanwhile no scheduler of the node claims or dispatches.
 */
export class Scheduler implements SoloMember {
  readonly workerId: string;
  /** Worker ids of this queue on this node share it; startup reclaim matches it (§17.3). */
  readonly reclaimPrefix: string;
  private state: SchedulerState = 'created';
  private buffer: ClaimedRow[] = [];
  /** The poison-pill suspect this scheduler holds for its solo run (§26.5), until it is answered. */
  private suspect: ClaimedRow | undefined;
  /** The suspect's step was started (its task is in `running`, then `awaiting`). */
  private suspectStarted = false;
  /** Buffered rows being released because a suspect holds the node. */
  private releasing: Promise<void> | undefined;
  /** Rows whose step is running: at most `concurrency`. */
  private readonly running = new Map<string, Task>();
  /** Rows whose outcome is with the flusher: at most {@link maxAwaitingCommit}. */
  private readonly awaiting = new Map<string, Task>();
  /** Steps past their timeout whose promise has not settled: each still takes a slot. */
  private abandoned = 0;
  /**
   * The backpressure bound: a step is dispatched only while running steps and rows awaiting
   * commit are fewer than `2 × concurrency + prefetch`, so at most that many await commit.
   */
  readonly maxAwaitingCommit: number;
  private picking: Promise<void> | undefined;
  private refillWanted = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private pokeWindow: NodeJS.Timeout | undefined;
  private pokeTrailing = false;
  private shedding: Promise<void> | undefined;
  /** The last pick claimed fewer rows than it wanted: nothing runnable was left behind. */
  private drainedQueue = false;
  private refillTimer: NodeJS.Immediate | undefined;
  private interval: number;
  /** The queue's fleet-wide pause as this scheduler last learned it (docs/design.md §27.6). */
  private pausedNow = false;
  /** Claim statements run so far: a poll tick that ran none probes the pause if it holds a buffer. */
  private claims = 0;
  /** Moving average of this queue's step durations, ms (dispatch → last outcome handed over). */
  private stepMs: number | undefined;
  private readonly logger = new Logger('GenDurable');
  /** Epoch ms of the last loop activity and successful heartbeat (health, §21). */
  lastActivityAt = 0;
  lastHeartbeatAt = 0;

  constructor(
    private readonly sql: SqlExecutor,
    readonly queue: string,
    readonly concurrency: number,
    private readonly options: ResolvedOptions,
    private readonly executor: Executor,
    private readonly picker: Picker,
    private readonly telemetry: Telemetry,
    /** The node's solo run of poison-pill suspects, shared by all its schedulers (§26.5). */
    private readonly solo: SoloRun,
    /** Rows went back to runnable while the node runs (a prefetch shed): other nodes may take them. */
    private readonly onReleased: (queue: string) => void = () => undefined,
  ) {
    this.reclaimPrefix = `${options.name}:${queue}@${options.nodeId}-`;
    this.workerId = `${this.reclaimPrefix}${randomBytes(4).toString('hex')}`;
    this.interval = options.pollInterval;
    this.maxAwaitingCommit = 2 * concurrency + this.maxPrefetch();
    solo.add(this);
  }

  get status(): SchedulerState {
    return this.state;
  }

  /** Steps running now (what `concurrency` bounds), abandoned ones past their timeout included. */
  get inFlightCount(): number {
    return this.running.size + this.abandoned;
  }

  /** Rows whose step returned and whose outcome awaits its commit. */
  get awaitingCommitCount(): number {
    return this.awaiting.size;
  }

  get bufferedCount(): number {
    return this.buffer.length;
  }

  /** Steps running and rows awaiting commit (what a solo run waits for, §26.5). */
  get busyCount(): number {
    return this.inFlightCount + this.awaiting.size;
  }

  /** The queue is paused fleet-wide, as this scheduler last learned it (docs/design.md §27.6). */
  get paused(): boolean {
    return this.pausedNow;
  }

  /** Reclaims a dead predecessor's claims, then starts polling and heartbeating. */
  async start(): Promise<void> {
    if (this.state !== 'created') return;
    this.state = 'running';
    this.lastActivityAt = Date.now();
    this.lastHeartbeatAt = Date.now();
    try {
      // Retried like the engine's other boot statements while the database is unreachable
      // (docs/operations.md, "Boot"); a failure past bootTimeout leaves the claims to the lease.
      await retryWhileUnreachable(`startup reclaim of queue ${this.queue}`, () => this.reclaim(), {
        timeoutMs: this.options.bootTimeout,
        onRetry: (what, err) =>
          this.logger.warn(`boot: ${what} could not reach the database (${String(err)}); retrying`),
      });
    } catch (err) {
      this.logger.error(`startup reclaim of queue ${this.queue} failed: ${String(err)}`);
    }
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.options.heartbeatInterval);
    this.schedulePoll(0);
  }

  /**
   * A poke: runnable work may exist. A pick in flight may have scanned before the poked row
   * committed, so it is asked to go again (like a completion during a pick, §5.1) instead of
   * losing the poke. A saturated scheduler drops it: its completion refill finds the work.
   * ("Busy" is read as "no free slot": a scheduler running one long step with 49 slots free must
   * not leave a poked row to the poll.) Otherwise it fills at once (leading edge). Further pokes
   * within 10 ms coalesce into one trailing fill (docs/design.md §5.5) only while the last pick
   * came back full, i.e. while there may be more than it took; once a pick found fewer rows than
   * it wanted the queue is drained, and a poke means new rows: it picks at once, so a trickle of
   * inserts does not wait out the window (at most one pick in flight bounds the picks either way).
   */
  poke(): void {
    if (this.state !== 'running') return;
    if (this.picking) {
      this.refillWanted = true;
      return;
    }
    if (!this.hasFreeSlots()) return;
    if (this.pokeWindow && !this.drainedQueue) {
      this.pokeTrailing = true;
      return;
    }
    if (!this.pokeWindow) {
      this.pokeWindow = setTimeout(() => {
        this.pokeWindow = undefined;
        if (this.pokeTrailing) {
          this.pokeTrailing = false;
          if (this.picking) this.refillWanted = true;
          else if (this.hasFreeSlots()) void this.pick(true);
        }
      }, POKE_DEBOUNCE_MS);
    }
    void this.pick(true);
  }

  private hasFreeSlots(): boolean {
    return this.demand() > 0;
  }

  /**
   * docs/design.md §5.2: `concurrency + prefetch − (running + buffer)`; 0 while the rows
   * awaiting commit are at their bound (backpressure).
   */
  private demand(): number {
    if (this.backpressured() || this.solo.active) return 0;
    return this.concurrency + this.prefetch() - (this.inFlightCount + this.buffer.length);
  }

  /**
   * The prefetch now: the option, or with `'auto'` running + prefetched = max(800, 4 ×
   * concurrency) while steps average under 2 ms, max(200, 4 × concurrency) while they average
   * under 50 ms, else 0. One claim is in flight at a time, so a queue of short steps drains at
   * most a capacity per claim round trip (its execution plus its commit's WAL flush): the
   * shorter the steps, the more rows that round trip must bring to keep the slots busy
   * (docs/performance.md, "Profiles").
   */
  prefetch(): number {
    const option = this.options.prefetch;
    if (option !== 'auto') return option;
    if (this.stepMs === undefined || this.stepMs >= AUTO_PREFETCH_STEP_MS) return 0;
    return this.autoPrefetch(
      this.stepMs < AUTO_FAST_STEP_MS ? AUTO_FAST_CAPACITY_MIN : AUTO_CAPACITY_MIN,
    );
  }

  /** The largest prefetch the option allows (with `'auto'`, that of trivial steps). */
  private maxPrefetch(): number {
    const option = this.options.prefetch;
    return option === 'auto' ? this.autoPrefetch(AUTO_FAST_CAPACITY_MIN) : option;
  }

  /** `'auto'`'s prefetch for a capacity floor: running + prefetched = max(floor, 4 × concurrency). */
  private autoPrefetch(floor: number): number {
    return Math.max(floor, AUTO_CAPACITY_PER_SLOT * this.concurrency) - this.concurrency;
  }

  /**
   * The minDemand now: the option, or with `'auto'` half the capacity while prefetching (a
   * refill then starts while half the buffer is still to run, and claims stay large), else 1.
   */
  private minDemand(): number {
    const option = this.options.minDemand;
    if (option !== 'auto') return option;
    const prefetch = this.prefetch();
    return prefetch === 0 ? 1 : Math.ceil((this.concurrency + prefetch) / 2);
  }

  /** The flusher is too far behind: dispatch and claims wait for its answers. */
  private backpressured(): boolean {
    return this.running.size + this.awaiting.size >= this.maxAwaitingCommit;
  }

  /**
   * Graceful drain (docs/design.md §17.4): stop claiming, release the buffer, wait up to
   * `drainTimeout` for running steps and for rows awaiting commit (all still heartbeated),
   * then stop. `scheduler:drain`'s `inFlight` counts both.
   */
  async drain(): Promise<void> {
    if (this.state !== 'running') {
      this.state = 'stopped';
      return;
    }
    this.state = 'draining';
    this.clearTimer('poll');
    this.clearTimer('poke');
    if (this.refillTimer) clearImmediate(this.refillTimer);
    this.refillTimer = undefined;
    if (this.picking) await this.picking.catch(() => undefined);
    if (this.shedding) await this.shedding;
    if (this.releasing) await this.releasing;
    const buffered = this.buffer;
    this.buffer = [];
    // A suspect not yet started goes back with the buffer (uncounted: its step never ran).
    const suspect = this.suspect;
    if (suspect && !this.suspectStarted) {
      this.suspect = undefined;
      buffered.push(suspect);
      this.solo.end(this);
    }
    let released = 0;
    if (buffered.length > 0) {
      try {
        released = (await this.release(buffered)).length;
      } catch (err) {
        this.logger.error(
          `releasing ${buffered.length} buffered row(s) of ${this.queue} failed; the reaper will: ${String(err)}`,
        );
      }
    }
    const tasks = [...this.running.values(), ...this.awaiting.values()];
    const inFlight = tasks.length;
    this.telemetry.emit('scheduler:drain', { released, inFlight }, { queue: this.queue });
    if (inFlight > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), this.options.drainTimeout);
      });
      const finished = await Promise.race([
        Promise.all(tasks.map((t) => t.done)).then(() => true),
        timeout,
      ]);
      clearTimeout(timer);
      if (!finished) this.abortRunning();
    }
    this.clearTimer('heartbeat');
    this.state = 'stopped';
  }

  /**
   * `drainTimeout` ran out (docs/design.md §27.5): the steps still running get their
   * `ctx.signal` aborted with a `DrainTimeoutError`; the node stops waiting for them, and their
   * rows stay executing for the reaper (or this node's successor) to run again.
   */
  private abortRunning(): void {
    const drainTimeoutMs = this.options.drainTimeout;
    for (const { row } of this.running.values()) {
      this.executor.abortStep(
        row.id,
        row.claimSeq,
        (r) => new DrainTimeoutError(r.fsm, r.id, r.step, drainTimeoutMs),
      );
    }
  }

  private busy(): boolean {
    return (
      this.picking !== undefined ||
      this.suspect !== undefined ||
      this.running.size > 0 ||
      this.awaiting.size > 0 ||
      this.buffer.length > 0
    );
  }

  private clearTimer(which: 'poll' | 'heartbeat' | 'poke'): void {
    if (which === 'poll' && this.pollTimer) clearTimeout(this.pollTimer);
    if (which === 'heartbeat' && this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (which === 'poke' && this.pokeWindow) clearTimeout(this.pokeWindow);
    if (which === 'poll') this.pollTimer = undefined;
    if (which === 'heartbeat') this.heartbeatTimer = undefined;
    if (which === 'poke') this.pokeWindow = undefined;
  }

  private schedulePoll(delay: number): void {
    if (this.state !== 'running') return;
    this.clearTimer('poll');
    this.pollTimer = setTimeout(() => void this.pollTick(), delay);
  }

  private async pollTick(): Promise<void> {
    this.pollTimer = undefined;
    const wasIdle = !this.busy();
    const claimsBefore = this.claims;
    const fetched = await this.pick(false);
    // Paused on purpose for a suspect's solo run (§26.5): alive, not stalled (health, §21).
    if (this.solo.active) this.lastActivityAt = Date.now();
    if (this.claims === claimsBefore && this.buffer.length > 0) await this.probePause();
    // A paused queue polls at the base period, so a resume is seen within pollInterval.
    if (fetched > 0 || !wasIdle || this.busy() || this.pausedNow) {
      this.interval = this.options.pollInterval;
    } else this.interval = Math.min(this.interval * 2, this.options.maxPollInterval);
    this.telemetry.emit(
      'scheduler:saturation',
      {
        inFlight: this.inFlightCount,
        awaitingCommit: this.awaiting.size,
        buffer: this.buffer.length,
        concurrency: this.concurrency,
        prefetch: this.prefetch(),
      },
      { queue: this.queue },
    );
    this.schedulePoll(this.interval);
  }

  /** One pick (docs/design.md §5.2–5.4). Returns the number of rows claimed. */
  private pick(fromPoke: boolean): Promise<number> {
    if (this.picking) {
      this.refillWanted = true;
      return Promise.resolve(0);
    }
    let fetched = 0;
    const run = (async () => {
      do {
        this.refillWanted = false;
        if (this.state !== 'running') return;
        const capacity = this.concurrency + this.prefetch();
        const demand = this.demand();
        const idle = this.inFlightCount === 0 && this.buffer.length === 0;
        if (demand <= 0 || (demand < Math.min(this.minDemand(), capacity) && !idle)) return;
        this.claims += 1;
        const pickStarted = performance.now();
        const { rows, paused } = await this.picker.pickBatch(this.queue, demand, this.workerId);
        const pickMs = performance.now() - pickStarted;
        fetched += rows.length;
        this.drainedQueue = rows.length < demand;
        this.lastActivityAt = Date.now();
        await this.learnPause(paused);
        this.telemetry.emit(
          'pick:stop',
          { count: rows.length, demand, durationMs: pickMs },
          { queue: this.queue, worker: this.workerId },
        );
        // A paused queue's claim took nothing: wait for the poll, a poke or a resume.
        if (paused) return;
        // Empty, unless a poke or completion arrived meanwhile: then scan once more.
        if (rows.length === 0) continue;
        if (fromPoke) this.interval = this.options.pollInterval;
        const runnable = await this.setSuspectsApart(rows);
        if (runnable.length === 0) return;
        this.buffer.push(...runnable);
        this.dispatch();
        // A full batch may mean more is waiting: refill while there is demand.
        if (rows.length === demand) this.refillWanted = true;
      } while (this.refillWanted && this.state === 'running');
    })()
      .catch((err: unknown) => {
        this.logger.error(`pick on queue ${this.queue} failed: ${String(err)}`);
      })
      .finally(() => {
        this.picking = undefined;
      });
    this.picking = run;
    return run.then(() => fetched);
  }

  /**
   * A scheduler saturated with buffered rows makes no claim, so a poll tick without one reads
   * the pause itself: one primary-key read per poll tick, in that state only. A failed read
   * changes nothing (the next tick tries again).
   */
  private async probePause(): Promise<void> {
    try {
      const pause = await READ_QUEUE_PAUSE.run(this.sql, { queue: this.queue });
      await this.learnPause(pause !== null);
    } catch (err) {
      this.logger.warn(`reading the pause of queue ${this.queue} failed: ${String(err)}`);
    }
  }

  /**
   * docs/design.md §27.6: on learning its queue paused, the scheduler releases its buffered
   * rows to runnable (attempt kept; the reaper takes them if the release fails) and starts no
   * further step; running steps finish and commit. On learning it resumed, it claims again.
   */
  private async learnPause(paused: boolean): Promise<void> {
    if (paused === this.pausedNow) return;
    this.pausedNow = paused;
    if (!paused) {
      this.telemetry.emit('scheduler:resumed', { count: 1 }, this.identity());
      return;
    }
    const buffered = this.buffer;
    this.buffer = [];
    let released = 0;
    if (buffered.length > 0) {
      try {
        released = (await this.release(buffered)).length;
      } catch (err) {
        this.logger.error(
          `releasing ${buffered.length} buffered row(s) of paused queue ${this.queue} failed; the reaper will: ${String(err)}`,
        );
      }
    }
    this.telemetry.emit('scheduler:paused', { released }, this.identity());
  }

  private identity(): { queue: string; worker: string } {
    return { queue: this.queue, worker: this.workerId };
  }

  private dispatch(): void {
    if (this.solo.active) return;
    while (
      !this.pausedNow &&
      this.inFlightCount < this.concurrency &&
      !this.backpressured() &&
      this.state === 'running'
    ) {
      // Never a second task for an id still held (docs/design.md §26.1): such a row waits.
      const index = this.buffer.findIndex(
        (r) => !this.running.has(r.id) && !this.awaiting.has(r.id),
      );
      if (index < 0) return;
      const [row] = this.buffer.splice(index, 1);
      if (!row) return;
      const id = row.id;
      // Inline chains (docs/design.md §7) run while the queue runs; draining ends them at the
      // next step, and so does a suspect's solo run (§26.5), which waits for them. A chain keeps
      // its slot through its continue commits: only its last outcome frees it.
      const done = this.stepStarting(row)
        .then(() =>
          this.executor.execute(row, {
            chain: () => this.state === 'running' && !this.solo.active && !this.pausedNow,
            onStepsDone: () => {
              this.stepReturned(row);
              this.stepsDone(id);
            },
            onAbandoned: (settled) => this.abandon(settled),
          }),
        )
        .then(
          (result) => this.completed(id, result.kind),
          () => this.completed(id, null),
        );
      this.running.set(id, { row, startedAt: performance.now(), done });
    }
  }

  /**
   * Before the step of a row that has already lost a worker, records that it starts under this
   * claim (MARK_STEP_STARTED, committed before the step runs): a loss from now on happened while
   * the step ran and counts toward the poison-pill cap; a loss while it sat in the buffer does
   * not (docs/reliability.md, finding F-R11). Rows that never lost a worker skip it. A failed
   * mark is not fatal: the step runs, and a loss during it goes uncounted this once.
   */
  private async stepStarting(row: ClaimedRow): Promise<void> {
    if (row.reaps === 0) return;
    await MARK_STEP_STARTED.run(this.sql, { worker: row.worker, row }).catch(() => undefined);
  }

  /**
   * A step ran past its timeout and the executor stopped waiting for it: its row goes on
   * (its timeout outcome to the flusher), its promise keeps a slot until it settles.
   */
  private abandon(settled: Promise<void>): void {
    this.abandoned += 1;
    void settled.then(() => {
      this.abandoned -= 1;
      this.solo.settled();
      this.slotFreed();
    });
  }

  /**
   * The step of a row that has already lost a worker returned: its mark is cleared
   * (CLEAR_STEP_STARTED, beside the flush), so a loss while its outcome waits for the commit
   * does not count (finding F-R11). Best-effort: a failed clear leaves the loss counted.
   */
  private stepReturned(row: ClaimedRow): void {
    if (row.reaps === 0) return;
    void CLEAR_STEP_STARTED.run(this.sql, { worker: row.worker, row }).catch(() => undefined);
  }

  /**
   * Poison-pill suspects (docs/design.md §26.5) never go to the buffer. The first one, when the
   * node can run it alone, is held for its solo run ({@link SoloRun.begin}); then the rest of the
   * batch goes back to runnable, as every scheduler's buffer does. A suspect the node cannot
   * take now (another one holds it) goes back, and so does the whole batch of a pick that
   * returns while a suspect holds the node. Returns the rows to buffer.
   */
  private async setSuspectsApart(rows: ClaimedRow[]): Promise<ClaimedRow[]> {
    if (!this.solo.active && !rows.some((r) => r.suspect)) return rows;
    let back: ClaimedRow[] = [];
    let keep: ClaimedRow[] = [];
    for (const row of rows) {
      if (!row.suspect || this.solo.active || this.state !== 'running') {
        (row.suspect || this.solo.active ? back : keep).push(row);
        continue;
      }
      this.suspect = row;
      const taken = this.solo.begin(
        this,
        row.id,
        (waitedMs) => this.runSuspect(row, waitedMs),
        (waitedMs) => this.abandonSuspect(row, waitedMs),
      );
      if (!taken) {
        this.suspect = undefined;
        back.push(row);
      }
    }
    if (this.solo.active) {
      back = back.concat(keep);
      keep = [];
    }
    if (back.length > 0) await this.giveBack(back);
    return keep;
  }

  /** Releases `rows` to runnable and pokes their queue so another node may run them. */
  private async giveBack(rows: readonly ClaimedRow[]): Promise<void> {
    try {
      if ((await this.release(rows)).length > 0) this.onReleased(this.queue);
    } catch (err) {
      this.logger.warn(
        `releasing ${rows.length} row(s) of ${this.queue} failed; the reaper will: ${String(err)}`,
      );
    }
  }

  /** A suspect holds the node (§26.5): nothing is claimed or dispatched; the buffer goes back. */
  quiesce(): void {
    if (this.pokeWindow) this.clearTimer('poke');
    if (this.buffer.length === 0 || this.releasing) return;
    const buffered = this.buffer;
    this.buffer = [];
    this.releasing = this.giveBack(buffered).finally(() => {
      this.releasing = undefined;
    });
  }

  /** The solo run is over: claim and dispatch again, from a fresh poll. */
  resume(): void {
    if (this.state !== 'running') return;
    this.interval = this.options.pollInterval;
    this.dispatch();
    this.schedulePoll(0);
  }

  /**
   * The node is quiet: the suspect's step starts alone (marked as started, so a loss now fails
   * it), with no inline chain; when its outcome is answered every scheduler resumes.
   */
  private runSuspect(row: ClaimedRow, waitedMs: number): void {
    if (this.suspect !== row) return;
    const id = row.id;
    this.suspectStarted = true;
    this.telemetry.emit(
      'scheduler:solo',
      { waitedMs },
      { id, fsm: row.fsm, step: row.step, queue: this.queue, result: 'started' },
    );
    const done = this.stepStarting(row)
      .then(() =>
        this.executor.execute(row, {
          chain: () => false,
          onStepsDone: () => {
            this.stepReturned(row);
            this.stepsDone(id);
          },
          onAbandoned: (settled) => this.abandon(settled),
        }),
      )
      .then(
        (result) => this.completed(id, result.kind),
        () => this.completed(id, null),
      );
    this.running.set(id, { row, startedAt: performance.now(), done });
  }

  /** The node did not go quiet in time: the suspect goes back uncounted (still a suspect). */
  private abandonSuspect(row: ClaimedRow, waitedMs: number): void {
    if (this.suspect !== row) return;
    this.suspect = undefined;
    this.telemetry.emit(
      'scheduler:solo',
      { waitedMs },
      { id: row.id, fsm: row.fsm, step: row.step, queue: this.queue, result: 'abandoned' },
    );
    void this.giveBack([row]);
  }

  /** The row's last step returned and its outcome went to the flusher: its slot is free. */
  private stepsDone(id: string): void {
    const task = this.running.get(id);
    if (!task) return;
    this.running.delete(id);
    const ms = performance.now() - task.startedAt;
    this.stepMs =
      this.stepMs === undefined ? ms : this.stepMs + (ms - this.stepMs) * STEP_AVERAGE_WEIGHT;
    this.awaiting.set(id, task);
    this.slotFreed();
    this.shedPrefetch();
  }

  /**
   * `prefetch: 'auto'` stops prefetching once the queue's steps average 50 ms or more; rows it
   * already prefetched would then wait behind whole steps, hidden from other nodes. Once every
   * slot is running, every buffered row is released to runnable and the queue is poked, so
   * another node with free slots runs them. One release at a time; a failed one leaves the rows
   * buffered, still held.
   */
  private shedPrefetch(): void {
    if (this.options.prefetch !== 'auto' || this.shedding || this.state !== 'running') return;
    if (this.inFlightCount < this.concurrency) return;
    // Only long steps shed: rows claimed while steps were trivial stay buffered when steps
    // merely turn short (2–50 ms; no claim is made until the buffer is under the new capacity),
    // so a queue whose average hovers near 2 ms does not release and re-claim rows.
    if (this.prefetch() > 0 || this.buffer.length === 0) return;
    const shed = this.buffer.splice(0);
    this.shedding = this.release(shed)
      .then((ids) => {
        const released = new Set(ids);
        // A row the release did not match is no longer ours to run (its lease was taken):
        // dropping it is what the drain does too.
        if (released.size > 0) {
          this.telemetry.emit(
            'scheduler:shed',
            { released: released.size },
            { queue: this.queue, worker: this.workerId },
          );
          this.onReleased(this.queue);
        }
      })
      .catch((err: unknown) => {
        this.buffer.push(...shed);
        this.logger.warn(
          `releasing ${shed.length} prefetched row(s) of ${this.queue} failed; they stay buffered: ${String(err)}`,
        );
      })
      .finally(() => {
        this.shedding = undefined;
      });
  }

  /** The executor is done with the row: its flush answered, or it took the crash path. */
  private completed(id: string, kind: ExecutionResult['kind']): void {
    if (this.suspectStarted && this.suspect?.id === id) {
      this.running.delete(id);
      this.awaiting.delete(id);
      this.suspect = undefined;
      this.suspectStarted = false;
      this.lastActivityAt = Date.now();
      this.solo.end(this);
      return;
    }
    if (this.running.delete(id)) {
      this.solo.settled();
      this.slotFreed();
      return;
    }
    const wasBackpressured = this.backpressured();
    if (!this.awaiting.delete(id)) return;
    this.solo.settled();
    this.lastActivityAt = Date.now();
    if (this.state !== 'running') return;
    // The buffer may hold this id again (re-claimed after its commit): it may run now.
    this.dispatch();
    // Refill when the bound held claims back, or when the committed row may be runnable again
    // (found even when pokes are off).
    if (
      (wasBackpressured || kind === 'next' || kind === 'retry' || kind === 'sleep') &&
      this.refillDue()
    ) {
      this.scheduleRefill();
    }
  }

  private slotFreed(): void {
    this.lastActivityAt = Date.now();
    if (this.state !== 'running') return;
    this.dispatch();
    if (this.refillDue()) this.scheduleRefill();
  }

  /**
   * A refill is due once the buffer is empty or, while the queue prefetches, once `minDemand`
   * rows are wanted: the next claim is then in flight while the buffered rows still run, so a
   * claim's round trip and commit overlap the steps instead of following them.
   */
  private refillDue(): boolean {
    if (this.pausedNow) return false;
    if (this.buffer.length === 0) return true;
    return this.prefetch() > 0 && this.demand() >= this.minDemand();
  }

  /**
   * Slots freed together (a batch of short steps, the answers of one group commit) refill once
   * after they have all been counted (next macrotask), so the claim asks for all the freed
   * slots at once instead of one row, then the rest.
   */
  private scheduleRefill(): void {
    if (this.refillTimer) return;
    this.refillTimer = setImmediate(() => {
      this.refillTimer = undefined;
      if (this.state === 'running' && this.refillDue() && this.demand() > 0) {
        void this.pick(false);
      }
    });
  }

  private held(): ClaimedRow[] {
    const rows = [...this.buffer];
    // Held apart until its step starts (a stale task of the same id may still be running).
    if (this.suspect && !this.suspectStarted) rows.push(this.suspect);
    for (const t of this.running.values()) rows.push(t.row);
    for (const t of this.awaiting.values()) rows.push(t.row);
    return rows;
  }

  private async heartbeat(): Promise<void> {
    const rows = this.held();
    if (
      FAULTS_ENABLED &&
      (await faultPoint('heartbeat.before', {
        ids: rows.map((r) => r.id),
        worker: this.workerId,
      })) === 'skip'
    ) {
      return;
    }
    if (rows.length === 0) {
      this.lastHeartbeatAt = Date.now();
      return;
    }
    try {
      // docs/design.md §28.2: the pending ctx.progress values ride on this statement.
      const progress = this.executor.pendingProgress(rows);
      const { renewed, lost, cancelRequested } = await HEARTBEAT.run(this.sql, {
        worker: this.workerId,
        rows,
        leaseMs: this.options.leaseTtl,
        ...(progress && { progress }),
      });
      this.lastHeartbeatAt = Date.now();
      if (progress) this.executor.progressStored(rows, progress, new Set(renewed));
      if (lost.length > 0) this.claimsLost(lost);
      if (cancelRequested.length > 0) this.cancelsRequested(cancelRequested);
      await this.picker.renew(rows);
    } catch (err) {
      this.logger.warn(`heartbeat of queue ${this.queue} failed: ${String(err)}`);
    }
  }

  /**
   * The heartbeat found claims this worker no longer holds (docs/design.md §27.5): the steps
   * running under them get their `ctx.signal` aborted with a `LeaseLostError`. Matched by the
   * claim's token, so a row claimed again since is left alone. The step runs on and its
   * outcome is stale.
   */
  private claimsLost(lost: readonly HeldClaim[]): void {
    for (const claim of lost) {
      this.executor.abortStep(
        claim.id,
        claim.claimSeq,
        (r) => new LeaseLostError(r.fsm, r.id, r.step),
      );
    }
  }

  /**
   * The heartbeat found claims whose cancel was requested (docs/design.md §27.2): the steps
   * running under them get their `ctx.signal` aborted with a `StepCancelledError` (once; a
   * later heartbeat finds the signal aborted already). Matched by the claim's token. The
   * flush turns their outcome into `cancelled`.
   */
  private cancelsRequested(claims: readonly CancelledClaim[]): void {
    for (const claim of claims) {
      this.executor.abortStep(
        claim.id,
        claim.claimSeq,
        (r) => new StepCancelledError(r.fsm, r.id, r.step, claim.reason),
      );
    }
  }

  private release(rows: readonly ClaimedRow[]): Promise<string[]> {
    return this.picker.release(this.workerId, rows);
  }

  private async reclaim(): Promise<void> {
    const margin = Math.max(this.options.leaseTtl - 2 * this.options.heartbeatInterval, 0);
    const maxReaps = this.options.reaper ? this.options.reaper.maxReaps : DEFAULT_MAX_REAPS;
    const rows = await RECLAIM_PREDECESSOR.run(this.sql, {
      queue: this.queue,
      workerPrefix: this.reclaimPrefix,
      leaseBelowMs: margin,
      maxReaps,
      spreadMs: this.options.leaseTtl,
    });
    if (rows.length > 0) {
      this.telemetry.emit('scheduler:reclaimed', { count: rows.length }, { queue: this.queue });
    }
  }
}
