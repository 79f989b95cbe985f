import type { DurableStatus } from '../gen-durable.constants';
import { InvalidInputError } from '../errors/invalid-input.error';

/**
 * A durable stream of an instance, as a step writes it (`ctx.stream(name)`, docs/streams.md):
 * an append-only sequence of JSON chunks with dense offsets from 0, kept with the instance and
 * removed with it by GC or purge.
 */
export interface DurableStream {
  /** The stream's name within its instance. */
  readonly name: string;
  /**
   * Appends `chunk` (any JSON value, checked like state: `InvalidInputError` or
   * `PayloadTooLargeError` at the call) and resolves with its offset once committed. Writes of
   * one step are committed in call order; concurrent writes of any steps on the node are
   * group-committed (one statement when alone, no added delay). Rejects with
   * `LeaseLostError` when the step's claim was lost (nothing written), or with the database's
   * error after the engine's retries. A write the step does not await still commits before
   * the step's outcome does, and a failed one fails the step. A write after the step returned
   * is refused (`InvalidInputError`).
   */
  write(chunk: unknown): Promise<number>;
}

/** One chunk of a stream as a reader receives it. */
export interface StreamChunk<T = unknown> {
  /** Its offset: 0 for the first chunk, then +1 per chunk, with no gap. */
  readonly offset: number;
  /** The JSON value the step wrote (as stored: read back as JSON reads it). */
  readonly chunk: T;
}

/** Options of `readStream` (docs/streams.md). */
export interface ReadStreamOptions {
  /**
   * The first offset to read (default 0). A reader that reconnects passes the offset after the
   * last one it received and gets every later chunk exactly once.
   */
  from?: number;
  /**
   * Wait for chunks written after the committed ones, until the instance ends (default true);
   * `false` reads what is committed now and ends.
   */
  follow?: boolean;
  /** Ends the iteration when aborted (a disconnected client); the iterator then returns. */
  signal?: AbortSignal;
}

/** What `streamInfo` answers about one stream of an instance. */
export interface StreamInfo {
  /** How many chunks the stream holds: the offset its next chunk gets (0 when never written). */
  readonly length: number;
  /** The instance's status. */
  readonly status: DurableStatus;
  /** The instance ended (done, failed or cancelled): the stream gets no more chunks. */
  readonly ended: boolean;
}

/** Longest stream name, in UTF-16 code units. */
export const MAX_STREAM_NAME_LENGTH = 200;

/** `name` checked as a stream name at `path`: a non-empty string of at most 200 characters. */
export function streamName(name: unknown, path: string): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new InvalidInputError(path, 'must be a non-empty string');
  }
  if (name.length > MAX_STREAM_NAME_LENGTH) {
    throw new InvalidInputError(path, `must be at most ${MAX_STREAM_NAME_LENGTH} characters`);
  }
  if (name.includes('\u0000')) {
    throw new InvalidInputError(path, 'contains \\u0000, which PostgreSQL text cannot store');
  }
  return name;
}
