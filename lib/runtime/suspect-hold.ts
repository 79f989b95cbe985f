import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';
import type { SoloMember, SoloRun } from './solo-run';

/** What a scheduler lends its suspect hold. */
export interface SuspectHost extends SoloMember {
  readonly queue: string;
  /** The scheduler runs (it is not draining or stopped). */
  isRunning(): boolean;
  /** Releases `rows` to runnable and pokes their queue so another node may run them. */
  giveBack(rows: readonly ClaimedRow[]): Promise<void>;
  /** Starts the suspect's step alone: no inline chain. */
  startAlone(row: ClaimedRow): void;
}

/**
 * The poison-pill suspect one scheduler holds apart for the node's solo run (docs/design.md
 * §26.5), from its claim until its outcome is answered or it is given back. Suspects never go
 * to the buffer; while one holds the node, nothing else is claimed or dispatched.
 */
export class SuspectHold {
  private suspect: ClaimedRow | undefined;
  /** The suspect's step was started (its task is running, then awaiting its commit). */
  private started = false;

  constructor(
    private readonly solo: SoloRun,
    private readonly telemetry: Telemetry,
  ) {}

  /** A suspect is held (started or not). */
  get holding(): boolean {
    return this.suspect !== undefined;
  }

  /** The suspect held apart whose step has not started (a stale task of its id may still run). */
  get unstarted(): ClaimedRow | undefined {
    return this.started ? undefined : this.suspect;
  }

  /** The row `id` is the suspect whose step was started. */
  isRunning(id: string): boolean {
    return this.started && this.suspect?.id === id;
  }

  /**
   * Sets the suspects of a claimed batch apart. The first one, when the node can run it alone,
   * is held for its solo run ({@link SoloRun.begin}); then the rest of the batch goes back to
   * runnable, as every scheduler's buffer does. A suspect the node cannot take now (another one
   * holds it) goes back, and so does the whole batch of a pick that returns while a suspect
   * holds the node. Returns the rows to buffer.
   */
  async setApart(host: SuspectHost, rows: ClaimedRow[]): Promise<ClaimedRow[]> {
    if (!this.solo.active && !rows.some((r) => r.suspect)) return rows;
    let back: ClaimedRow[] = [];
    let keep: ClaimedRow[] = [];
    for (const row of rows) {
      if (!row.suspect || this.solo.active || !host.isRunning()) {
        (row.suspect || this.solo.active ? back : keep).push(row);
        continue;
      }
      this.suspect = row;
      const taken = this.solo.begin(
        host,
        row.id,
        (waitedMs) => this.run(host, row, waitedMs),
        (waitedMs) => this.abandon(host, row, waitedMs),
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
    if (back.length > 0) await host.giveBack(back);
    return keep;
  }

  /** The drain: a suspect not yet started is let go (it goes back with the buffer, uncounted). */
  takeUnstarted(host: SuspectHost): ClaimedRow | undefined {
    const suspect = this.unstarted;
    if (!suspect) return undefined;
    this.suspect = undefined;
    this.solo.end(host);
    return suspect;
  }

  /** The started suspect's outcome was answered: every scheduler of the node resumes. */
  end(host: SuspectHost): void {
    this.suspect = undefined;
    this.started = false;
    this.solo.end(host);
  }

  /**
   * The node is quiet: the suspect's step starts alone (marked as started, so a loss now fails
   * it), with no inline chain; when its outcome is answered every scheduler resumes.
   */
  private run(host: SuspectHost, row: ClaimedRow, waitedMs: number): void {
    if (this.suspect !== row) return;
    this.started = true;
    this.telemetry.emit(
      'scheduler:solo',
      { waitedMs },
      { id: row.id, fsm: row.fsm, step: row.step, queue: host.queue, result: 'started' },
    );
    host.startAlone(row);
  }

  /** The node did not go quiet in time: the suspect goes back uncounted (still a suspect). */
  private abandon(host: SuspectHost, row: ClaimedRow, waitedMs: number): void {
    if (this.suspect !== row) return;
    this.suspect = undefined;
    this.telemetry.emit(
      'scheduler:solo',
      { waitedMs },
      { id: row.id, fsm: row.fsm, step: row.step, queue: host.queue, result: 'abandoned' },
    );
    void host.giveBack([row]);
  }
}
