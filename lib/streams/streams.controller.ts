import type { ServerResponse } from 'node:http';

import {
  BadRequestException,
  Get,
  Headers,
  Inject,
  Logger,
  NotFoundException,
  Param,
  Query,
  Res,
} from '@nestjs/common';

import type { EngineService } from '../engine/engine.service';
import { InvalidInputError } from '../errors/invalid-input.error';
import type { StreamInfo } from '../fsm/durable-stream';
import { NoTargetError } from '../errors/no-target.error';
import { NotAvailableError } from '../errors/not-available.error';

/** The injection token of the engine a streams mount reads through. */
export const STREAMS_ENGINE = Symbol('GenDurableStreamsEngine');
/** The injection token of a streams mount's settings. */
export const STREAMS_MOUNT = Symbol('GenDurableStreamsMount');

/** A streams mount's settings, as data. */
export interface StreamsMount {
  readonly path: string;
  readonly engine: string;
  /** ms between keep-alive comments on an idle stream. */
  readonly keepAliveMs: number;
  /** The reconnection delay sent to the client (`retry:`), ms. */
  readonly retryMs: number;
}

/** The reply of either adapter: Express's response is a ServerResponse; Fastify's reply wraps one. */
interface AdapterReply {
  hijack?: () => unknown;
  raw?: ServerResponse;
}

/** The largest offset a `from` or `Last-Event-ID` may name. */
const OFFSET = /^(0|[1-9][0-9]{0,15})$/;

/**
 * `GET <path>/:id/:name` (docs/streams.md): the instance's stream `name` as Server-Sent Events,
 * one event per chunk — `id: <offset>` and `data: <the chunk as JSON>` — from offset `?from=N`
 * (default 0), or after the `Last-Event-ID` an EventSource sends when it reconnects (it wins
 * over `from`), following new chunks until the instance ends; then an `end` event, and the
 * response ends. A reconnect after the end, or a request past the end of an ended instance's
 * stream, is answered 204, which stops an EventSource for good. 400 for a bad id, name or
 * offset; 404 when no instance has that id. A comment every `keepAliveMs` keeps proxies from
 * closing an idle stream; a client that leaves stops the read. A read that fails (the engine
 * shutting down, a database outage) ends the response without `end`: the client reconnects
 * with its Last-Event-ID. Mounted at its path by
 * `GenDurableStreamsModule.register`, on Express or Fastify.
 */
export class StreamsController {
  private readonly logger = new Logger('GenDurable');

  constructor(
    @Inject(STREAMS_ENGINE) private readonly engine: EngineService,
    @Inject(STREAMS_MOUNT) private readonly mount: StreamsMount,
  ) {}

  @Get(':id/:name')
  async stream(
    @Param('id') id: string,
    @Param('name') name: string,
    @Query('from') from: unknown,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: AdapterReply & ServerResponse,
  ): Promise<void> {
    const start = firstOffset(from, lastEventId);
    let info: StreamInfo;
    try {
      info = await this.engine.streamInfo(id, name);
    } catch (err) {
      if (err instanceof NoTargetError) throw new NotFoundException(err.message);
      if (err instanceof InvalidInputError) throw new BadRequestException(err.message);
      throw err;
    }
    const res = rawResponse(reply);
    if (info.ended && start >= info.length) {
      // Nothing more will come: 204 tells an EventSource not to reconnect.
      res.writeHead(204, { 'Cache-Control': 'no-store' });
      res.end();
      return;
    }
    const headers: Record<string, string> = {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      'X-Accel-Buffering': 'no',
    };
    if ((res.req?.httpVersionMajor ?? 1) < 2) headers['Connection'] = 'keep-alive';
    res.writeHead(200, headers);
    const left = new AbortController();
    const abort = (): void => left.abort();
    res.once('close', abort);
    const keepAlive = setInterval(() => {
      if (!res.writableNeedDrain) res.write(': keep-alive\n\n');
    }, this.mount.keepAliveMs);
    keepAlive.unref();
    try {
      await send(res, `retry: ${this.mount.retryMs}\n\n`, left.signal);
      for await (const c of this.engine.readStream(id, name, {
        from: start,
        signal: left.signal,
      })) {
        await send(res, `id: ${c.offset}\ndata: ${JSON.stringify(c.chunk)}\n\n`, left.signal);
        if (left.signal.aborted) return;
      }
      if (!left.signal.aborted) await send(res, 'event: end\ndata: {}\n\n', left.signal);
    } catch (err) {
      // The client reconnects from its Last-Event-ID: nothing is lost or repeated.
      if (!left.signal.aborted && !(err instanceof NotAvailableError)) {
        this.logger.warn(`stream "${name}" of instance ${id} over SSE stopped: ${String(err)}`);
      }
    } finally {
      clearInterval(keepAlive);
      res.off('close', abort);
      if (!res.writableEnded) res.end();
    }
  }
}

/** The offset to start from: after `Last-Event-ID` when present, else `from`, else 0. */
function firstOffset(from: unknown, lastEventId: string | undefined): number {
  if (lastEventId !== undefined && lastEventId !== '') {
    if (!OFFSET.test(lastEventId)) {
      throw new BadRequestException('Last-Event-ID must be the offset of a chunk of this stream');
    }
    return Number(lastEventId) + 1;
  }
  if (from === undefined || from === '') return 0;
  if (typeof from !== 'string' || !OFFSET.test(from)) {
    throw new BadRequestException('from must be an integer ≥ 0 (an offset)');
  }
  return Number(from);
}

/** The Node response under the adapter's reply (Fastify's is taken over: `hijack`). */
function rawResponse(reply: AdapterReply & ServerResponse): ServerResponse {
  if (typeof reply.hijack === 'function' && reply.raw !== undefined) {
    reply.hijack();
    return reply.raw;
  }
  return reply;
}

/** Writes `text`, waiting for the socket to drain when it is full (or the client to leave). */
async function send(res: ServerResponse, text: string, left: AbortSignal): Promise<void> {
  if (left.aborted || res.write(text)) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      left.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    left.addEventListener('abort', done, { once: true });
  });
}
