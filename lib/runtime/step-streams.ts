import { Logger } from '@nestjs/common';

import { InvalidInputError } from '../errors/invalid-input.error';
import { type DurableStream, streamName } from '../fsm/durable-stream';
import { toJsonText } from '../serialization/json-value';
import type { StreamBatcher } from './stream-batcher';

/** What a run's writes name: the row, its claim and the step. */
export interface StreamWriterRow {
  readonly id: string;
  readonly fsm: string;
  readonly step: string;
  readonly claimSeq: string;
  readonly worker: string;
}

/** How a run's writes ended: undefined when all committed, else the first failure. */
export type StreamsSettled = { readonly error: unknown } | undefined;

/**
 * The `ctx.stream(name)` writers of one step run (docs/streams.md). Each write is checked at the
 * call (a bad chunk rejects its promise with `InvalidInputError` / `PayloadTooLargeError`), then
 * handed to the engine's {@link StreamBatcher} under the run's claim. Every promise a write
 * returns is handled here too, so a write the step does not await is never an unhandled
 * rejection; its failure is kept instead, and {@link settle} — which the executor awaits before
 * the step's outcome is built — answers it, so the step fails. After `settle`, writes are
 * refused: a step's writes end with it.
 */
export class StepStreams {
  private readonly opened = new Map<string, DurableStream>();
  private readonly pending = new Set<Promise<void>>();
  private failure: StreamsSettled;
  private ended = false;
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly batcher: StreamBatcher,
    private readonly row: StreamWriterRow,
    /** A chunk's JSON text at most, bytes (`maxStateBytes`). */
    private readonly maxChunkBytes: number,
  ) {}

  /** The writer of stream `name` (the same object for the same name). */
  stream(name: unknown): DurableStream {
    const checked = streamName(name, 'ctx.stream.name');
    let stream = this.opened.get(checked);
    if (stream === undefined) {
      stream = Object.freeze({
        name: checked,
        write: (chunk: unknown): Promise<number> => this.write(checked, chunk),
      });
      this.opened.set(checked, stream);
    }
    return stream;
  }

  /**
   * Refuses later writes and waits for the pending ones (each is bounded by its statement and
   * the batcher's retries). Answers the first failure of any write of the run, or undefined.
   */
  async settle(): Promise<StreamsSettled> {
    this.ended = true;
    while (this.pending.size > 0) await Promise.all([...this.pending]);
    return this.failure;
  }

  private write(name: string, chunk: unknown): Promise<number> {
    const path = `ctx.stream(${JSON.stringify(name)}).write`;
    let written: Promise<number>;
    if (this.ended) {
      this.logger.warn(
        `${this.row.fsm}#${this.row.id} step ${this.row.step} wrote to stream "${name}" after it returned: the write is refused`,
      );
      written = Promise.reject(
        new InvalidInputError(
          path,
          'was called after the step returned: a step writes while it runs',
        ),
      );
    } else {
      try {
        const text = toJsonText(chunk, `${path}.chunk`, this.maxChunkBytes);
        written = this.batcher.append({
          id: this.row.id,
          claimSeq: this.row.claimSeq,
          worker: this.row.worker,
          name,
          chunk: text,
          fsm: this.row.fsm,
          step: this.row.step,
        });
      } catch (err) {
        // toJsonText's InvalidInputError or PayloadTooLargeError.
        written = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      const tracked = written.then(ignore, (err: unknown) => {
        this.failure ??= { error: err };
      });
      this.pending.add(tracked);
      void tracked.finally(() => this.pending.delete(tracked));
    }
    // Handled here: an unawaited write never surfaces as an unhandled rejection.
    written.catch(ignore);
    return written;
  }
}

function ignore(): void {}
