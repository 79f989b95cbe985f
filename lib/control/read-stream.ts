import type { SqlExecutor } from '../db/sql-executor';
import { InvalidInputError } from '../errors/invalid-input.error';
import { NoTargetError } from '../errors/no-target.error';
import { NotAvailableError } from '../errors/not-available.error';
import {
  type ReadStreamOptions,
  type StreamChunk,
  type StreamInfo,
  streamName,
} from '../fsm/durable-stream';
import { isTerminalStatus } from '../gen-durable.constants';
import { STREAM_PROBE, STREAM_READ } from '../sql/stream.sql';
import type { StreamWaiter } from './control-runtime';
import { optionsObject } from './input-checks';
import { readResolved } from './read-target';
import { type ResolvedTarget, resolveTarget, targetLabel } from './target';

/** Chunks per read at most. */
const PAGE_CHUNKS = 256;
/** Stored bytes per read at most, beyond its first chunk. */
const PAGE_BYTES = 1024 * 1024;
/** The client's first pause between reads that found nothing new, ms; doubles up to {@link MAX_POLL_MS}. */
const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 250;

/** `readStream`'s options, checked. */
interface ResolvedReadOptions {
  readonly from: number;
  readonly follow: boolean;
  readonly signal: AbortSignal | undefined;
}

/** Checks `readStream`'s arguments at the call (`InvalidInputError` naming the field). */
export function resolveReadStream(
  target: unknown,
  name: unknown,
  options: unknown,
): { to: ResolvedTarget; name: string; options: ResolvedReadOptions } {
  const to = resolveTarget(target, 'readStream.target');
  const checked = streamName(name, 'readStream.name');
  const given = (optionsObject(options, ['from', 'follow', 'signal'], 'readStream.options') ??
    {}) as ReadStreamOptions;
  const from = given.from ?? 0;
  if (!Number.isSafeInteger(from) || from < 0) {
    throw new InvalidInputError('readStream.options.from', 'must be an integer ≥ 0 (an offset)');
  }
  if (given.follow !== undefined && typeof given.follow !== 'boolean') {
    throw new InvalidInputError('readStream.options.follow', 'must be a boolean');
  }
  if (given.signal !== undefined && !(given.signal instanceof AbortSignal)) {
    throw new InvalidInputError('readStream.options.signal', 'must be an AbortSignal');
  }
  return {
    to,
    name: checked,
    options: { from, follow: given.follow ?? true, signal: given.signal },
  };
}

/**
 * A stream's chunks from `options.from` on, in offset order, each exactly once (docs/streams.md).
 * Each read is one STREAM_READ (at most 256 chunks, about 1 MiB): the chunks after the last
 * offset yielded, the stream's length and the instance's status from one snapshot. While the
 * stream holds more, it reads on; once it has yielded them all it ends if the instance has
 * ended (every chunk of a step commits before its outcome, so the snapshot that shows the end
 * shows every chunk) or `follow` is off, else it waits on `waiter` and reads again. The first
 * read finding no instance throws `NoTargetError`; an instance deleted later (GC, purge) ends
 * the iteration. Aborting `options.signal` ends it at its next wait or chunk. An engine that
 * shuts down makes its waiting readers throw `NotAvailableError` (not an end: read on elsewhere).
 */
export async function* readStreamChunks<T>(
  sql: SqlExecutor,
  waiter: StreamWaiter,
  to: ResolvedTarget,
  name: string,
  options: ResolvedReadOptions,
): AsyncGenerator<StreamChunk<T>, void, undefined> {
  const { follow, signal } = options;
  const id = 'id' in to ? to.id : (await readResolved(sql, to))?.id;
  if (id === undefined) throw new NoTargetError(targetLabel(to), 'it has no stream to read');
  let next = options.from;
  let first = true;
  let idle = 0;
  for (;;) {
    if (signal?.aborted) return;
    const page = await STREAM_READ.run(sql, {
      id,
      name,
      from: next,
      limit: PAGE_CHUNKS,
      maxBytes: PAGE_BYTES,
    });
    if (page.status === null) {
      if (first) throw new NoTargetError(targetLabel(to), 'it has no stream to read');
      return;
    }
    first = false;
    for (const c of page.chunks) {
      // Never: a snapshot holds a gap-free prefix of a stream (STREAM_APPEND).
      if (c.offset !== next) {
        throw new Error(
          `gen-durable bug: stream "${name}" of instance ${id} read offset ${c.offset} where ${next} was due`,
        );
      }
      yield { offset: c.offset, chunk: c.chunk as T };
      next = c.offset + 1;
      if (signal?.aborted) return;
    }
    idle = page.chunks.length > 0 ? 0 : idle + 1;
    if (next < page.length) continue;
    if (isTerminalStatus(page.status) || !follow) return;
    await waiter.wait(id, name, next, idle, signal);
    if (waiter.closed === true && !signal?.aborted) {
      // Not an end: the reader goes on from `next` elsewhere (an EventSource reconnects).
      throw new NotAvailableError(
        'readStream',
        `this engine is shutting down: read stream "${name}" again from offset ${next}`,
      );
    }
  }
}

/**
 * One stream's length and its instance's status (`streamInfo`): one STREAM_PROBE.
 * `NoTargetError` when no instance answers the target.
 */
export async function readStreamInfo(
  sql: SqlExecutor,
  target: unknown,
  name: unknown,
): Promise<StreamInfo> {
  const to = resolveTarget(target, 'streamInfo.target');
  const checked = streamName(name, 'streamInfo.name');
  const id = 'id' in to ? to.id : (await readResolved(sql, to))?.id;
  const probe =
    id === undefined
      ? undefined
      : (await STREAM_PROBE.run(sql, { streams: [{ id, name: checked }] }))[0];
  if (probe === undefined || probe.status === null) {
    throw new NoTargetError(targetLabel(to), 'it has no stream to read');
  }
  return { length: probe.length, status: probe.status, ended: isTerminalStatus(probe.status) };
}

/**
 * The client's stream wait (docs/client.md): a pause of 25 ms after a read that found chunks,
 * doubling per read that found none up to 250 ms, cut short by `signal`.
 */
export const pollStreamWaiter: StreamWaiter = {
  wait(_id, _name, _next, idle, signal) {
    const ms = Math.min(FIRST_POLL_MS * 2 ** Math.max(0, idle - 1), MAX_POLL_MS);
    return new Promise<void>((resolve) => {
      if (signal?.aborted) {
        resolve();
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
    });
  },
};
