import { Logger } from '@nestjs/common';

import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';
import { orderFairly } from './prefetch-policy';
import type { StepSlots } from './step-slots';

/** Puts rows back to runnable (attempt kept) and answers the ids it released. */
export type ReleaseRows = (rows: readonly ClaimedRow[]) => Promise<string[]>;

/**
 * One scheduler's claimed rows waiting for a slot (docs/design.md §5.2), and their ways back to
 * runnable: all of them at a drain or a pause, in the background when a suspect holds the node
 * (§26.5), or shed when the prefetch turns to 0 (docs/operations.md, "prefetch"). A failed
 * release is logged and left to the reaper, except a shed's, whose rows stay buffered (held).
 */
export class ClaimBuffer {
  private rows: ClaimedRow[] = [];
  /**
   * {@link StepSlots.keysFreedCount} when a scan found no row for the slots kept for new keys;
   * undefined once rows joined the buffer since.
   */
  private newKeyScanAt: number | undefined;
  /** Buffered rows being released because a suspect holds the node. */
  private releasing: Promise<void> | undefined;
  private shedding: Promise<void> | undefined;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly queue: string,
    private readonly release: ReleaseRows,
    private readonly telemetry: Telemetry,
    /** Rows went back to runnable while the node runs: other nodes may take them. */
    private readonly onReleased: (queue: string) => void,
    private readonly workerId: () => string,
  ) {}

  get length(): number {
    return this.rows.length;
  }

  /** The buffered rows now (a copy). */
  snapshot(): ClaimedRow[] {
    return [...this.rows];
  }

  /**
   * Claimed rows join the buffer. On a fair queue keys take turns: a new key's row runs before
   * most of a prefetched backlog of another key (docs/many-tenants.md "Prefetch on a fair queue").
   */
  add(rows: ClaimedRow[], fair: boolean): void {
    if (fair) this.rows = orderFairly(this.rows, rows);
    else this.rows.push(...rows);
    this.newKeyScanAt = undefined;
  }

  /** A row that starts ahead of everything buffered (a row inserted claimed, §5.5.1). */
  putFirst(row: ClaimedRow): void {
    this.rows.unshift(row);
  }

  /** A row that goes back with the buffer (a suspect whose step never started). */
  putLast(row: ClaimedRow): void {
    this.rows.push(row);
  }

  /**
   * Takes the first row that may start now: never a second task for an id `slots` still holds
   * (docs/design.md §26.1); with `newKeysOnly` (only the slots kept for new keys are free), only
   * a row whose key runs nothing (docs/many-tenants.md "A slot for new keys"). A scan that
   * found none is not repeated until rows join the buffer or a key stops running.
   */
  take(slots: StepSlots, newKeysOnly: boolean): ClaimedRow | undefined {
    if (newKeysOnly && this.newKeyScanAt === slots.keysFreedCount) return undefined;
    // A loop and `shift` (no closure, no spliced array) in the common case of the head.
    const rows = this.rows;
    let index = 0;
    while (
      index < rows.length &&
      (slots.holds(rows[index]!.id) ||
        (newKeysOnly && slots.keyRunning(rows[index]!.fairnessKey ?? null)))
    ) {
      index++;
    }
    if (index === rows.length) {
      if (newKeysOnly) this.newKeyScanAt = slots.keysFreedCount;
      return undefined;
    }
    return index === 0 ? rows.shift() : rows.splice(index, 1)[0];
  }

  /** Waits for a shed and a background release in flight. */
  async settled(): Promise<void> {
    if (this.shedding) await this.shedding;
    if (this.releasing) await this.releasing;
  }

  /**
   * Releases every buffered row to runnable (the reaper takes them if the release fails) and
   * answers how many were released. `why` names the occasion in the log.
   */
  async releaseAll(why: string): Promise<number> {
    const buffered = this.rows;
    this.rows = [];
    if (buffered.length === 0) return 0;
    try {
      return (await this.release(buffered)).length;
    } catch (err) {
      this.logger.error(
        `releasing ${buffered.length} buffered row(s) of ${why}queue ${this.queue} failed; the reaper will: ${String(err)}`,
      );
      return 0;
    }
  }

  /** Releases `rows` to runnable and pokes their queue so another node may run them. */
  async giveBack(rows: readonly ClaimedRow[]): Promise<void> {
    try {
      if ((await this.release(rows)).length > 0) this.onReleased(this.queue);
    } catch (err) {
      this.logger.warn(
        `releasing ${rows.length} row(s) of ${this.queue} failed; the reaper will: ${String(err)}`,
      );
    }
  }

  /** Gives the whole buffer back in the background (a suspect holds the node, §26.5). */
  giveAllBack(): void {
    if (this.rows.length === 0 || this.releasing) return;
    const buffered = this.rows;
    this.rows = [];
    this.releasing = this.giveBack(buffered).finally(() => {
      this.releasing = undefined;
    });
  }

  /**
   * Sheds the buffer: every buffered row is released to runnable and the queue is poked, so
   * another node with free slots runs them. One shed at a time; a failed one leaves the rows
   * buffered, still held.
   */
  shed(): void {
    if (this.shedding) return;
    const shed = this.rows.splice(0);
    this.shedding = this.release(shed)
      .then((ids) => {
        // A row the release did not match is no longer ours to run (its lease was taken):
        // dropping it is what the drain does too.
        if (ids.length > 0) {
          this.telemetry.emit(
            'scheduler:shed',
            { released: new Set(ids).size },
            { queue: this.queue, worker: this.workerId() },
          );
          this.onReleased(this.queue);
        }
      })
      .catch((err: unknown) => {
        this.rows.push(...shed);
        this.newKeyScanAt = undefined;
        this.logger.warn(
          `releasing ${shed.length} prefetched row(s) of ${this.queue} failed; they stay buffered: ${String(err)}`,
        );
      })
      .finally(() => {
        this.shedding = undefined;
      });
  }
}
