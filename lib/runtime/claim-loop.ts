import { Logger } from '@nestjs/common';

import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import { ClaimFloor } from './claim-floor';
import type { ClaimedRow } from './claimed-row';
import type { Picker } from './picker';

const POKE_DEBOUNCE_MS = 10;

/** What the claim loop asks of its scheduler. */
export interface ClaimHost {
  readonly queue: string;
  readonly workerId: string;
  /** The scheduler runs (it is not draining or stopped). */
  isRunning(): boolean;
  /** Rows wanted now: 0 while saturated, backpressured, or a suspect holds the node. */
  demand(): number;
  /** Running + prefetched rows the queue may hold now (concurrency + prefetch). */
  capacity(): number;
  /**
   * Rows a poke's claim may take beyond {@link demand}: on a fair queue the capacity its refills
   * leave free, so a new key's row is claimed at once (docs/many-tenants.md "Prefetch on a fair
   * queue"); 0 on a plain queue, while backpressured, or while a suspect holds the node.
   */
  pokeReserve(): number;
  /** The least demand worth a claim unless idle (`minDemand`). */
  minDemand(): number;
  /** No step running and nothing buffered: any demand is worth a claim. */
  idle(): boolean;
  /** Holds a row: buffered, a suspect, running, or awaiting its commit. */
  holding(): boolean;
  /** The queue is paused fleet-wide, as last learned. */
  readonly paused: boolean;
  /** A claim answered whether the queue is paused (docs/design.md §27.6). */
  learnPause(paused: boolean): Promise<void>;
  /** A claim came back: the loop is alive (health, §21). */
  touched(): void;
  /** Claimed rows, to buffer and dispatch; false when none were kept. */
  accept(rows: ClaimedRow[]): Promise<boolean>;
  /** A poll tick's pick is over; `claimed` says whether it ran a claim statement. */
  ticked(claimed: boolean): Promise<void>;
  /** A refill is wanted now (the buffer ran low). */
  refillDue(): boolean;
}

/**
 * When one queue's scheduler claims (docs/design.md §5.2–5.5): at most one pick in flight, a
 * poll that backs off to `maxPollInterval` while idle, pokes that fill at once and coalesce
 * within 10 ms, and refills after completions, coalesced to the next macrotask. What to do with
 * the claimed rows is the scheduler's ({@link ClaimHost.accept}).
 */
export class ClaimLoop {
  private picking: Promise<void> | undefined;
  private refillWanted = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private pokeWindow: NodeJS.Timeout | undefined;
  private pokeTrailing = false;
  /** The last pick claimed fewer rows than it wanted: nothing runnable was left behind. */
  private drainedQueue = false;
  private refillTimer: NodeJS.Immediate | undefined;
  /**
   * A poke on a fair queue is owed a claim (docs/many-tenants.md "Prefetch on a fair queue"):
   * the next pick takes the poke reserve too and ignores `minDemand`, once the reserve is whole.
   */
  private poked = false;
  /**
   * A fair queue's poke claim running beside the pick in flight (at most one): it takes only the
   * poke reserve, which the pick in flight did not ask for (docs/many-tenants.md "Prefetch on a
   * fair queue").
   */
  private pokePicking: Promise<void> | undefined;
  /** Rows the pick in flight asked for (0 without one): the room a poke claim must leave it. */
  private requested = 0;
  /** Rows the poke claim in flight asked for (0 without one). */
  private pokeRequested = 0;
  /** The next look behind the claim floor (docs/design.md §5.3.1). */
  private probeTimer: NodeJS.Timeout | undefined;
  /** The look behind the claim floor in flight, beside the claims. */
  private probing: Promise<void> | undefined;
  private interval: number;
  /** Claim statements run so far: a poll tick that ran none may probe the pause. */
  private claims = 0;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly host: ClaimHost,
    private readonly picker: Picker,
    private readonly options: ResolvedOptions,
    private readonly telemetry: Telemetry,
    /** Where this queue's next claim starts (docs/design.md §5.3.1); releases put it back. */
    readonly floor: ClaimFloor = new ClaimFloor(),
  ) {
    this.interval = options.pollInterval;
  }

  /** A pick is in flight. */
  get inFlight(): boolean {
    return this.picking !== undefined || this.pokePicking !== undefined;
  }

  /**
   * The last pick claimed fewer rows than it asked for: as far as this node knows, no runnable
   * row of the queue waits (docs/design.md §5.5.1 "Inserted claimed"). A pick in flight (a
   * refill after a completion) does not change that until it answers.
   */
  get drained(): boolean {
    return this.drainedQueue;
  }

  /** Polls from now, at the base period. */
  restart(): void {
    this.interval = this.options.pollInterval;
    this.schedulePoll(0);
  }

  /** No further claim: timers cleared, the pick in flight awaited. */
  async stop(): Promise<void> {
    this.clearPoll();
    this.closePokeWindow();
    if (this.refillTimer) clearImmediate(this.refillTimer);
    this.refillTimer = undefined;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    if (this.picking) await this.picking.catch(() => undefined);
    if (this.pokePicking) await this.pokePicking.catch(() => undefined);
    if (this.probing) await this.probing;
  }

  closePokeWindow(): void {
    if (this.pokeWindow) clearTimeout(this.pokeWindow);
    this.pokeWindow = undefined;
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
    if (!this.host.isRunning()) return;
    if (this.host.pokeReserve() > 0) this.poked = true;
    if (this.picking) {
      this.refillWanted = true;
      // A fair queue does not wait for the pick in flight: its reserve is claimed beside it.
      if (this.poked) this.pokeClaim();
      return;
    }
    // A busy fair queue's poke claims only the reserve: a small claim answers sooner.
    if (this.poked && this.reserveOnly()) {
      this.pokeClaim();
      return;
    }
    if (this.pokeDemand() <= 0) return;
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
          else if (this.pokeDemand() > 0) void this.pick(true);
        }
      }, POKE_DEBOUNCE_MS);
    }
    void this.pick(true);
  }

  /**
   * Slots freed together (a batch of short steps, the answers of one group commit) refill once
   * after they have all been counted (next macrotask), so the claim asks for all the freed
   * slots at once instead of one row, then the rest.
   */
  scheduleRefill(): void {
    if (this.refillTimer) return;
    this.refillTimer = setImmediate(() => {
      this.refillTimer = undefined;
      if (!this.host.isRunning()) return;
      if ((this.host.refillDue() && this.host.demand() > 0) || this.pokeOwed()) {
        void this.pick(false);
      }
    });
  }

  /**
   * A poke on a fair queue waits for its claim, and the poke reserve is whole again: a freed
   * slot should pick now (docs/many-tenants.md "Prefetch on a fair queue").
   */
  pokeOwed(): boolean {
    return this.poked && this.host.pokeReserve() > 0 && this.host.demand() >= 0;
  }

  /**
   * A poke on a fair queue while a pick is in flight (docs/many-tenants.md "Prefetch on a fair
   * queue"): one claim of the room the poke reserve has left, beside that pick. The rows the
   * pick in flight locked are skipped (`SKIP LOCKED`); the new row committed after that pick
   * began, so this claim takes it (it waits at its end for the heads both claims advance). A
   * short answer leaves the poke owed to the next pick. At most one at a time; with no room
   * (the reserve still buffered) the poke stays owed to the next pick.
   */
  private pokeClaim(): void {
    if (this.pokePicking) return;
    const host = this.host;
    const reserve = host.pokeReserve();
    const room = Math.min(reserve, host.demand() + reserve - this.requested);
    if (room <= 0) return;
    this.poked = false;
    this.claims += 1;
    this.pokeRequested = room;
    this.pokePicking = (async () => {
      const started = performance.now();
      const { rows, paused } = await this.picker.pickBatch(host.queue, room, host.workerId);
      host.touched();
      await host.learnPause(paused);
      this.telemetry.emit(
        'pick:stop',
        { count: rows.length, demand: room, durationMs: performance.now() - started },
        { queue: host.queue, worker: host.workerId },
      );
      // Short: the pick in flight locked rows this claim ranked first (it skips them), so the
      // poke stays owed to the next pick.
      if (rows.length < room) this.poked = true;
      // A drain awaits this claim (stop()) before it releases the buffer, rows included.
      if (rows.length > 0) await host.accept(rows);
    })()
      .catch((err: unknown) => {
        this.logger.error(`poke claim on queue ${host.queue} failed: ${String(err)}`);
      })
      .finally(() => {
        this.pokePicking = undefined;
        this.pokeRequested = 0;
      });
  }

  /**
   * A poke on a busy fair queue claims only the poke reserve (docs/many-tenants.md "Prefetch on
   * a fair queue"): a claim of a few rows answers sooner than one of the whole demand, and the
   * refills claim the rest once `minDemand` rows are wanted. An idle queue, or one whose refill
   * is due anyway, claims its whole demand.
   */
  private reserveOnly(): boolean {
    const host = this.host;
    return host.holding() && host.demand() < Math.min(host.minDemand(), host.capacity());
  }

  /**
   * The rows a pick would claim now: {@link ClaimHost.demand}, plus the poke reserve while a poke
   * is owed a claim and the reserve is whole (a partly used reserve waits for its rows to start).
   */
  private pokeDemand(): number {
    const demand = this.host.demand();
    if (!this.poked || demand < 0) return demand;
    return demand + this.host.pokeReserve() - this.pokeRequested;
  }

  /**
   * While the claim floor is engaged, its look behind itself runs when its budget allows
   * (docs/design.md §5.3.1): beside the claims, never instead of one, so a look that walks
   * seconds of dead entries under a long pin does not stop the queue. A row it finds puts the
   * floor back, and the queue picks at once when it has demand.
   */
  private scheduleProbe(): void {
    if (this.probeTimer || this.probing || !this.host.isRunning()) return;
    const delay = this.floor.probeDelay(Date.now());
    if (delay === undefined) return;
    this.probeTimer = setTimeout(
      () => {
        this.probeTimer = undefined;
        this.probing = this.probeBehindFloor().finally(() => {
          this.probing = undefined;
          this.scheduleProbe();
        });
      },
      Math.ceil(delay) + 1,
    );
  }

  private async probeBehindFloor(): Promise<void> {
    const before = this.floor.probeFrom();
    if (before === undefined || !this.host.isRunning()) return;
    try {
      const { head, execMs, horizonXids } = await this.picker.probeBehindFloor(
        this.host.queue,
        before,
      );
      this.floor.learnProbe(head, execMs, Date.now(), horizonXids);
      if (head === undefined || !this.host.isRunning() || this.host.demand() <= 0) return;
      if (this.picking) this.refillWanted = true;
      else void this.pick(false);
    } catch (err) {
      this.logger.error(
        `look behind the claim floor of queue ${this.host.queue} failed: ${String(err)}`,
      );
    }
  }

  schedulePoll(delay: number): void {
    if (!this.host.isRunning()) return;
    this.clearPoll();
    this.pollTimer = setTimeout(() => void this.pollTick(), delay);
  }

  private clearPoll(): void {
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
  }

  private busy(): boolean {
    return this.picking !== undefined || this.host.holding();
  }

  private async pollTick(): Promise<void> {
    this.pollTimer = undefined;
    const wasIdle = !this.busy();
    const claimsBefore = this.claims;
    const fetched = await this.pick(false);
    await this.host.ticked(this.claims !== claimsBefore);
    // A paused queue polls at the base period, so a resume is seen within pollInterval.
    if (fetched > 0 || !wasIdle || this.busy() || this.host.paused) {
      this.interval = this.options.pollInterval;
    } else this.interval = Math.min(this.interval * 2, this.options.maxPollInterval);
    this.schedulePoll(this.interval);
  }

  /** One pick (docs/design.md §5.2–5.4). Returns the number of rows claimed. */
  private pick(fromPoke: boolean): Promise<number> {
    if (this.picking) {
      this.refillWanted = true;
      return Promise.resolve(0);
    }
    let fetched = 0;
    const host = this.host;
    const run = (async () => {
      do {
        this.refillWanted = false;
        if (!host.isRunning()) return;
        const capacity = host.capacity();
        // A fair queue's owed poke claims the reserve at once, whatever minDemand says.
        const forPoke = this.pokeOwed();
        // A busy queue's owed poke takes the reserve only (less what a poke claim in flight took).
        const full = this.pokeDemand();
        const demand = forPoke && this.reserveOnly() ? Math.min(host.pokeReserve(), full) : full;
        if (demand <= 0) return;
        if (!forPoke && demand < Math.min(host.minDemand(), capacity) && !host.idle()) return;
        if (forPoke) this.poked = false;
        this.claims += 1;
        const pickStarted = performance.now();
        this.requested = demand;
        const { rows, paused } = await this.picker
          .pickBatch(host.queue, demand, host.workerId, this.floor)
          .finally(() => {
            this.requested = 0;
          });
        const pickMs = performance.now() - pickStarted;
        fetched += rows.length;
        this.drainedQueue = rows.length < demand;
        host.touched();
        await host.learnPause(paused);
        this.telemetry.emit(
          'pick:stop',
          { count: rows.length, demand, durationMs: pickMs },
          { queue: host.queue, worker: host.workerId },
        );
        // A paused queue's claim took nothing: wait for the poll, a poke or a resume.
        if (paused) return;
        this.scheduleProbe();
        // Empty, unless a poke or completion arrived meanwhile: then scan once more.
        if (rows.length === 0) continue;
        if (fromPoke) this.interval = this.options.pollInterval;
        if (!(await host.accept(rows))) return;
        // A full batch may mean more is waiting: refill while there is demand.
        if (rows.length === demand) this.refillWanted = true;
      } while (this.refillWanted && host.isRunning());
    })()
      .catch((err: unknown) => {
        this.logger.error(`pick on queue ${host.queue} failed: ${String(err)}`);
      })
      .finally(() => {
        this.picking = undefined;
      });
    this.picking = run;
    return run.then(() => fetched);
  }
}
