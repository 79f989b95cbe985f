import { randomBytes } from 'node:crypto';

import { isTransient, type SqlExecutor } from '../db/sql-executor';
import { LeaseLostError } from '../errors/lease-lost.error';
import { STREAM_APPEND, type StreamAppendWrite } from '../sql/stream.sql';
import type { Telemetry } from '../telemetry/telemetry';

/** One write to append, with what its refusal names. */
export interface StreamAppend extends StreamAppendWrite {
  readonly fsm: string;
  readonly step: string;
}

interface Waiter {
  readonly write: StreamAppend;
  readonly resolve: (offset: number) => void;
  readonly reject: (err: unknown) => void;
}

/** A stream whose appends committed: its followers on this node are woken. */
export interface AppendedStream {
  readonly id: string;
  readonly name: string;
}

/** Writes per STREAM_APPEND statement at most. */
const MAX_BATCH = 500;
/** First retry delay of a failed append, ms; doubles up to {@link MAX_RETRY_DELAY_MS}. */
const FIRST_RETRY_DELAY_MS = 40;
const MAX_RETRY_DELAY_MS = 1_000;
/** At least this many attempts, even with a retry window shorter than their backoff. */
const MIN_ATTEMPTS = 3;

/**
 * Group commit of stream writes (docs/streams.md), one per engine: natural batching as the
 * flusher's and the insert batcher's durable lane — with no statement in flight a write is
 * appended at once, alone; writes arriving while one is in flight form the next statement
 * (≤ 500). Never two statements at once, so the writes of one step reach a stream in call
 * order. After a statement that answered several writes the lane stays taken for one
 * macrotask, so steps that write again as soon as they are answered join the next statement
 * together. Each write settles once its statement committed: its offset, `LeaseLostError` when
 * its claim was no longer current (`stream:refused`), or the error of a statement that failed
 * for good (`stream:error`). A transient failure is retried with the same batch token for as
 * long as the claims can still be valid (`leaseTtl / 2`): an attempt that had committed is
 * recognised by its token and answered, never applied twice.
 */
export class StreamBatcher {
  private buffer: Waiter[] = [];
  private writer: Promise<void> | undefined;

  constructor(
    private readonly sql: SqlExecutor,
    private readonly telemetry: Telemetry,
    /** Called after a statement committed, with the streams it appended to. */
    private readonly appended: (streams: readonly AppendedStream[]) => void,
    /** How long a failed append is retried, ms (`leaseTtl / 2`). */
    private readonly retryWindowMs: number,
  ) {}

  /** Appends one write; resolves with its offset once committed. */
  append(write: StreamAppend): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.buffer.push({ write, resolve, reject });
      if (!this.writer) this.start();
    });
  }

  /** Writes everything pending (shutdown). */
  async drain(): Promise<void> {
    while (this.buffer.length > 0 || this.writer) {
      if (!this.writer) this.start();
      await this.writer;
    }
  }

  private start(): void {
    this.writer = this.loop().finally(() => {
      this.writer = undefined;
      // A write that arrived after the loop's last check found the writer still set.
      if (this.buffer.length > 0) this.start();
    });
  }

  private async loop(): Promise<void> {
    while (this.buffer.length > 0) {
      const chunk = this.buffer.splice(0, MAX_BATCH);
      await this.writeBatch(chunk);
      // Hold the lane one macrotask after a shared statement (see InsertBatcher): the writers
      // just answered write again into the next statement together. A lone write waits for none.
      if (chunk.length > 1) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private async writeBatch(chunk: readonly Waiter[]): Promise<void> {
    const batch = randomBytes(12).toString('hex');
    const writes = chunk.map((w) => w.write);
    let offsets: (number | null)[];
    try {
      offsets = await this.withRetries(() => STREAM_APPEND.run(this.sql, { batch, writes }));
    } catch (err) {
      this.telemetry.emit('stream:error', { count: chunk.length }, { error: String(err) });
      for (const w of chunk) w.reject(err);
      return;
    }
    const streams = new Map<string, AppendedStream>();
    chunk.forEach((waiter, k) => {
      const offset = offsets[k];
      const w = waiter.write;
      if (offset === null || offset === undefined) {
        this.telemetry.emit(
          'stream:refused',
          { count: 1 },
          { id: w.id, fsm: w.fsm, step: w.step, name: w.name },
        );
        waiter.reject(new LeaseLostError(w.fsm, w.id, w.step));
        return;
      }
      streams.set(`${w.id}\u0000${w.name}`, { id: w.id, name: w.name });
      waiter.resolve(offset);
    });
    if (streams.size > 0) this.appended([...streams.values()]);
  }

  /** Runs one append, retrying transient failures with a doubling backoff (as the flusher). */
  private async withRetries<T>(write: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.retryWindowMs;
    let delay = FIRST_RETRY_DELAY_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (err) {
        if (!isTransient(err)) throw err;
        const wait = Math.min(delay, MAX_RETRY_DELAY_MS) * (0.5 + Math.random() / 2);
        if (attempt >= MIN_ATTEMPTS && Date.now() + wait > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, wait));
        delay *= 2;
      }
    }
  }
}
