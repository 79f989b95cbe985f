import { Logger } from '@nestjs/common';

import type { SqlExecutor } from '../db/sql-executor';
import type { InsertRow } from '../instance/insert-row';
import { DuplicateError } from '../errors/duplicate.error';
import { INSERT_CLAIMED, type InsertClaimedAnswer } from '../sql/claim.sql';
import {
  type InsertedEntry,
  type InsertedInstance,
  INSERT_INSTANCE,
  insertInstances,
} from '../sql/insert.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { ClaimedRow } from './claimed-row';

export interface InsertBatcherConfig {
  /** Rows per batch statement (`insertInstances`) at most. */
  readonly maxBatch: number;
  /** How long the first buffered `insertAsync` row waits for company, ms. */
  readonly maxDelayMs: number;
  /** `insertAsync` rows pending (buffered or being written) at most; beyond, callers insert durably. */
  readonly maxBuffer: number;
  /** Route awaited `insert()` calls through the group-commit lane (docs/design.md §26.11). */
  readonly durable: boolean;
  /** Buffer `insertAsync` rows (the lossy lane): only when the `insertBatcher` option is given. */
  readonly buffered: boolean;
}

/**
 * A slot a local scheduler reserved for a row about to be inserted (docs/design.md §5.5.1
 * "Inserted claimed"): the row is written already claimed by `worker`, leased `leaseMs`, and
 * handed to `take` once committed; `cancel` gives the slot back when no claimed row came of it.
 */
export interface InsertClaim {
  readonly worker: string;
  readonly leaseMs: number;
  take(row: ClaimedRow): void;
  cancel(): void;
}

interface DurableWaiter {
  readonly row: InsertRow;
  readonly resolve: (inserted: InsertedInstance) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * The insert batcher (docs/design.md §6.5, §26.11), two lanes:
 * - **lossy** (`insertAsync`, only with the `insertBatcher` option given): rows are buffered and
 *   the caller returns at once; the first row arms a `maxDelayMs` timer (or `maxBatch` rows fire
 *   at once), then the writer empties the buffer in batch statements (`insertInstances`:
 *   INSERT_UNKEYED_INSTANCES, or INSERT_INSTANCES when an entry has a key) of ≤ `maxBatch`
 *   rows and pokes the due queues. A failed statement drops its rows (`insert_batch:error`);
 *   buffered rows die with the process.
 * - **durable** (awaited `insert()`, on unless `durable: false`): natural batching like the
 *   flusher — with no statement of this lane in flight a call is written at once, alone, by
 *   INSERT_INSTANCE (the statement of a direct insert: a lone insert costs what it did), or
 *   INSERT_CLAIMED when a scheduler of its queue on this node has a slot for it (docs/design.md
 *   §5.5.1 "Inserted claimed": the row starts without a claim); calls
 *   arriving while one is in flight form the next statement, `insertInstances` for two or more.
 *   After a multi-row statement the lane stays taken for one macrotask, so its answered callers
 *   who insert again join the next statement together (closed-loop callers stay one batch).
 *   Each caller settles only after its statement returned (autocommit = committed): its own
 *   row by the returned ordinal, `DuplicateError` when its keyed entry was dropped (the others
 *   of the batch keep their ids), or the statement's error — every caller of a failed
 *   statement is rejected, none acknowledged.
 * Not live before `start()` or once draining: callers then insert directly.
 */
export class InsertBatcher {
  private live = false;
  private asyncBuffer: InsertRow[] = [];
  private asyncWriting = 0;
  private asyncWriter: Promise<void> | undefined;
  private asyncTimer: NodeJS.Timeout | undefined;
  private durableBuffer: DurableWaiter[] = [];
  private durableWriter: Promise<void> | undefined;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly sql: SqlExecutor,
    readonly config: InsertBatcherConfig,
    private readonly telemetry: Telemetry,
    /** Rows committed runnable and due now: their queues are poked (and claim floors lowered). */
    private readonly due: (rows: readonly InsertRow[]) => void,
    /**
     * Asked as a lone awaited insert is written: a slot of the row's queue on this node to
     * write it claimed into, or undefined (docs/design.md §5.5.1 "Inserted claimed").
     */
    private readonly claimFor: (row: InsertRow) => InsertClaim | undefined = () => undefined,
  ) {}

  /** Whether rows are accepted now (started, not draining). */
  get isLive(): boolean {
    return this.live;
  }

  /** Whether awaited inserts go through the group-commit lane now. */
  get takesDurable(): boolean {
    return this.live && this.config.durable;
  }

  /** `insertAsync` rows buffered or being written. */
  get pendingAsync(): number {
    return this.asyncBuffer.length + this.asyncWriting;
  }

  start(): void {
    this.live = true;
  }

  /**
   * Lossy lane: buffers `row` and returns true, or returns false (nothing buffered) when the
   * batcher is not live or `maxBuffer` rows are pending — the caller then inserts durably.
   */
  offer(row: InsertRow): boolean {
    if (!this.live || !this.config.buffered || this.pendingAsync >= this.config.maxBuffer) {
      return false;
    }
    this.asyncBuffer.push(row);
    if (this.asyncWriter) return true; // the running writer takes it
    if (this.asyncBuffer.length >= this.config.maxBatch) this.triggerAsync();
    else this.asyncTimer ??= setTimeout(() => this.triggerAsync(), this.config.maxDelayMs);
    return true;
  }

  /** Durable lane: resolves with the written row once its statement committed. */
  insert(row: InsertRow): Promise<InsertedInstance> {
    return new Promise<InsertedInstance>((resolve, reject) => {
      this.durableBuffer.push({ row, resolve, reject });
      if (!this.durableWriter) this.startDurableWriter();
    });
  }

  /** Shutdown (docs/design.md §17.4): stops accepting, then writes everything pending in both lanes. */
  async drain(): Promise<void> {
    this.live = false;
    while (
      this.asyncBuffer.length > 0 ||
      this.asyncWriter ||
      this.durableBuffer.length > 0 ||
      this.durableWriter
    ) {
      this.triggerAsync();
      if (!this.durableWriter && this.durableBuffer.length > 0) this.startDurableWriter();
      await Promise.all([this.asyncWriter, this.durableWriter]);
    }
  }

  private triggerAsync(): void {
    if (this.asyncTimer) clearTimeout(this.asyncTimer);
    this.asyncTimer = undefined;
    if (this.asyncWriter || this.asyncBuffer.length === 0) return;
    this.asyncWriter = this.writeAsync().finally(() => {
      this.asyncWriter = undefined;
    });
  }

  private async writeAsync(): Promise<void> {
    while (this.asyncBuffer.length > 0) {
      const chunk = this.asyncBuffer.splice(0, this.config.maxBatch);
      this.asyncWriting = chunk.length;
      try {
        const rows = await insertInstances(this.sql, { rows: chunk });
        this.reportDue(rows, chunk);
      } catch (err) {
        this.logger.error(
          `insert batch of ${chunk.length} row(s) failed and was dropped: ${String(err)}`,
        );
        this.telemetry.emit(
          'insert_batch:error',
          { count: chunk.length },
          { error: String(err), lane: 'async' },
        );
      } finally {
        this.asyncWriting = 0;
      }
    }
  }

  private startDurableWriter(): void {
    this.durableWriter = this.writeDurable().finally(() => {
      this.durableWriter = undefined;
      // A call that arrived after the loop's last check and before this callback found the
      // writer still set: it is written now, not left until the next call.
      if (this.durableBuffer.length > 0) this.startDurableWriter();
    });
  }

  private async writeDurable(): Promise<void> {
    while (this.durableBuffer.length > 0) {
      const chunk = this.durableBuffer.splice(0, this.config.maxBatch);
      const lone = chunk.length === 1 ? chunk[0] : undefined;
      if (lone) {
        await this.writeLone(lone);
      } else {
        await this.writeBatch(chunk);
        // Hold the lane one macrotask: the callers just answered (their continuations are
        // microtasks) insert again into this batch's successor instead of one of them finding
        // the lane idle and splitting the load into a lone statement and the rest. A lone
        // statement is not held, so sequential single inserts wait for nothing.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
  }

  /** One waiter alone: the direct insert's statement and answers. */
  private async writeLone(waiter: DurableWaiter): Promise<void> {
    const claim = this.claimFor(waiter.row);
    if (claim) return this.writeClaimed(waiter, claim);
    let inserted: InsertedInstance | null;
    try {
      inserted = await INSERT_INSTANCE.run(this.sql, waiter.row);
    } catch (err) {
      waiter.reject(err);
      return;
    }
    if (!inserted) {
      waiter.reject(new DuplicateError(waiter.row.correlationKey ?? ''));
      return;
    }
    waiter.resolve(inserted);
    if (inserted.due) this.due([waiter.row]);
  }

  /**
   * One waiter alone whose queue's scheduler here reserved a slot: INSERT_CLAIMED writes the row
   * claimed by that scheduler, which starts it before the caller is answered; a paused queue's
   * row is written runnable (and its queue poked, as any due row), a duplicate or an error gives
   * the slot back. An error leaves the row's fate unknown as for any insert: if it was written
   * claimed, nobody heartbeats it, and the reaper makes it runnable once its lease ends.
   */
  private async writeClaimed(waiter: DurableWaiter, claim: InsertClaim): Promise<void> {
    let answer: InsertClaimedAnswer;
    try {
      answer = await INSERT_CLAIMED.run(this.sql, {
        row: waiter.row,
        worker: claim.worker,
        leaseMs: claim.leaseMs,
      });
    } catch (err) {
      claim.cancel();
      waiter.reject(err);
      return;
    }
    if (answer.kind === 'claimed') {
      claim.take(answer.row);
      waiter.resolve({ id: answer.row.id, queue: answer.row.queue, due: true });
      return;
    }
    claim.cancel();
    if (answer.kind === 'duplicate') {
      waiter.reject(new DuplicateError(waiter.row.correlationKey ?? ''));
      return;
    }
    waiter.resolve({ id: answer.id, queue: answer.queue, due: true });
    this.due([waiter.row]);
  }

  private async writeBatch(chunk: readonly DurableWaiter[]): Promise<void> {
    let rows: InsertedEntry[];
    try {
      rows = await insertInstances(this.sql, { rows: chunk.map((w) => w.row) });
    } catch (err) {
      // Nothing of this statement committed (or its fate is unknown): no caller is acknowledged.
      this.telemetry.emit(
        'insert_batch:error',
        { count: chunk.length },
        { error: String(err), lane: 'durable' },
      );
      for (const waiter of chunk) waiter.reject(err);
      return;
    }
    const byOrd = new Map(rows.map((r) => [r.ord, r]));
    chunk.forEach((waiter, ord) => {
      const row = byOrd.get(ord);
      if (row !== undefined) waiter.resolve({ id: row.id, queue: row.queue, due: row.due });
      else if (waiter.row.correlationKey !== null) {
        waiter.reject(new DuplicateError(waiter.row.correlationKey));
      }
      // An unkeyed entry cannot collide: a missing row would be an engine bug, never an ack.
      else {
        waiter.reject(
          new Error(`gen-durable bug: insert batch returned no row for unkeyed entry ${ord}`),
        );
      }
    });
    this.reportDue(
      rows,
      chunk.map((w) => w.row),
    );
  }

  /** Hands the rows of one statement that were inserted due (by their ordinals) to {@link due}. */
  private reportDue(inserted: readonly InsertedEntry[], rows: readonly InsertRow[]): void {
    const due: InsertRow[] = [];
    for (const r of inserted) if (r.due) due.push(rows[r.ord]!);
    if (due.length > 0) this.due(due);
  }
}
