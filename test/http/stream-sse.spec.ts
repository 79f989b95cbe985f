import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

import {
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  Injectable,
} from '@nestjs/common';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  GenDurableStreamsModule,
  Step,
  type StepContext,
} from '../../lib';
import { eventually, FAST, Gates } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// GenDurableStreamsModule (docs/streams.md): GET <path>/:id/:name serves a durable stream as
// Server-Sent Events — `id: <offset>`, `data: <json>` per chunk, from ?from=N or after the
// Last-Event-ID a reconnecting EventSource sends, following the stream until its instance ends,
// then `event: end`; 204 once nothing more can come. Over real HTTP connections, on Express and
// Fastify, on real PostgreSQL.

const gates = new Gates();

@DurableFsm({ name: 'sse-talker', queue: 'sse' })
class TalkerFsm {
  @Step() async start(ctx: StepContext<{ words: string[]; gate?: string }>) {
    const out = ctx.stream('answer');
    const words = ctx.state.words;
    const half = ctx.state.gate === undefined ? words.length : Math.floor(words.length / 2);
    for (const w of words.slice(0, half)) await out.write({ text: w });
    if (ctx.state.gate !== undefined) await gates.wait(ctx.state.gate);
    for (const w of words.slice(half)) await out.write({ text: w });
    return done({});
  }
}

@DurableFsm({ name: 'sse-parked', queue: 'sse' })
class ParkedFsm {
  @Step() async start(ctx: StepContext) {
    await ctx.stream('answer').write('hello\nworld');
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish() {
    return done({});
  }
}

/** Lets a request through only with `x-reader: yes`. */
@Injectable()
class ReaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    return req.headers['x-reader'] === 'yes';
  }
}

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
}

/** One SSE response read as it arrives. */
interface SseResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly events: SseEvent[];
  /** Every comment line received (keep-alives). */
  readonly comments: string[];
  /** Resolves when the server ends the response. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Parses complete SSE events out of `buffer`; answers what is left. */
function parseEvents(buffer: string, events: SseEvent[], comments: string[]): string {
  let rest = buffer;
  for (let end = rest.indexOf('\n\n'); end >= 0; end = rest.indexOf('\n\n')) {
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    const event: SseEvent = {};
    let any = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        comments.push(line.slice(1).trim());
        continue;
      }
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id' || field === 'event' || field === 'retry') event[field] = value;
      else if (field === 'data') {
        event.data = event.data === undefined ? value : `${event.data}\n${value}`;
      }
      any = true;
    }
    if (any) events.push(event);
  }
  return rest;
}

function openSse(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<SseResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, headers: { accept: 'text/event-stream', ...headers } },
      (res) => {
        const events: SseEvent[] = [];
        const comments: string[] = [];
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          buffer = parseEvents(buffer + text, events, comments);
        });
        const ended = new Promise<void>((done) => {
          res.on('end', done);
          res.on('close', done);
        });
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          events,
          comments,
          ended,
          close: () => req.destroy(),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const chunksOf = (events: readonly SseEvent[]) =>
  events.filter((e) => e.id !== undefined).map((e) => ({ id: e.id, data: JSON.parse(e.data!) }));

for (const platform of ['express', 'fastify'] as const) {
  describe(`durable streams over SSE (${platform})`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let engine: EngineService;
    let port: number;
    let open = false;

    beforeAll(async () => {
      db = await createTestDatabase();
      const dataSource = await db.dataSource();
      const moduleRef = await Test.createTestingModule({
        imports: [
          GenDurableModule.forRoot({ dataSource, ...FAST, queues: { sse: 4 } }),
          GenDurableStreamsModule.register({ path: 'streams', keepAliveMs: 100 }),
          GenDurableStreamsModule.register({ path: 'guarded', guards: [ReaderGuard] }),
        ],
        providers: [TalkerFsm, ParkedFsm, ReaderGuard],
      }).compile();
      app =
        platform === 'fastify'
          ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
              logger: false,
            })
          : moduleRef.createNestApplication({ logger: false });
      await app.listen(0, '127.0.0.1');
      open = true;
      trackResource(`sse app (${platform})`, () => open);
      port = (app.getHttpServer().address() as AddressInfo).port;
      engine = app.get(EngineService);
    });
    afterAll(async () => {
      gates.openAll();
      if (open) await app.close();
      open = false;
      await db.drop();
    });

    const finished = async (words: string[]): Promise<string> => {
      const id = await engine.insert(TalkerFsm, { state: { words } });
      expect((await engine.await(id, { until: 'terminal', timeout: 15_000 })).kind).toBe('done');
      return id;
    };

    it('sends every chunk as an event with its offset, then `end`, and closes', async () => {
      const id = await finished(['a', 'b', 'c', 'd', 'e']);
      const res = await openSse(port, `/streams/${id}/answer`);
      await res.ended;
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(res.headers['cache-control']).toBe('no-cache, no-transform');
      expect(res.events[0]).toEqual({ retry: '1000' });
      expect(chunksOf(res.events)).toEqual(
        ['a', 'b', 'c', 'd', 'e'].map((text, i) => ({ id: String(i), data: { text } })),
      );
      expect(res.events.at(-1)).toEqual({ event: 'end', data: '{}' });
    });

    it('starts at ?from=N, or after the Last-Event-ID of a reconnect (which wins); 204 past the end', async () => {
      const id = await finished(['a', 'b', 'c', 'd', 'e']);
      const from = await openSse(port, `/streams/${id}/answer?from=3`);
      await from.ended;
      expect(chunksOf(from.events).map((c) => c.id)).toEqual(['3', '4']);

      const resumed = await openSse(port, `/streams/${id}/answer?from=0`, {
        'last-event-id': '1',
      });
      await resumed.ended;
      expect(chunksOf(resumed.events).map((c) => c.id)).toEqual(['2', '3', '4']);

      // A reconnect after the last chunk of an ended instance: 204, so EventSource stops.
      const after = await openSse(port, `/streams/${id}/answer`, { 'last-event-id': '4' });
      await after.ended;
      expect(after.status).toBe(204);
      expect(after.events).toEqual([]);
    });

    it('follows chunks written while connected, and a chunk with a newline stays one data line', async () => {
      const id = await engine.insert(TalkerFsm, {
        state: { words: ['one', 'two', 'three', 'four'], gate: `sse-${platform}` },
      });
      await gates.reached(`sse-${platform}`);
      const res = await openSse(port, `/streams/${id}/answer`);
      await eventually(async () => chunksOf(res.events).length === 2);
      gates.open(`sse-${platform}`);
      await res.ended;
      expect(chunksOf(res.events)).toEqual(
        ['one', 'two', 'three', 'four'].map((text, i) => ({ id: String(i), data: { text } })),
      );
      expect(res.events.at(-1)?.event).toBe('end');

      const parked = await engine.insert(ParkedFsm, {});
      await engine.await(parked, { timeout: 15_000 });
      const live = await openSse(port, `/streams/${parked}/answer`);
      await eventually(async () => chunksOf(live.events).length === 1);
      expect(chunksOf(live.events)).toEqual([{ id: '0', data: 'hello\nworld' }]);
      // Idle: keep-alive comments (every 100 ms here) until the instance ends.
      await eventually(async () => live.comments.includes('keep-alive'));
      await engine.signal(parked, 'go', {});
      await live.ended;
      expect(live.events.at(-1)?.event).toBe('end');
    });

    it('a client that leaves stops the read', async () => {
      const parked = await engine.insert(ParkedFsm, {});
      await engine.await(parked, { timeout: 15_000 });
      const waiting = engine.runtime.streamWaiter.waiting;
      const res = await openSse(port, `/streams/${parked}/answer`);
      await eventually(async () => chunksOf(res.events).length === 1);
      await eventually(async () => engine.runtime.streamWaiter.waiting === waiting + 1);
      res.close();
      await eventually(async () => engine.runtime.streamWaiter.waiting === waiting);
      await engine.signal(parked, 'go', {});
    });

    it('400 for a bad id or offset, 404 for an unknown instance, guards apply', async () => {
      const id = await finished(['a']);
      expect((await openSse(port, `/streams/abc/answer`)).status).toBe(400);
      expect((await openSse(port, `/streams/${id}/answer?from=-1`)).status).toBe(400);
      expect((await openSse(port, `/streams/${id}/answer?from=x`)).status).toBe(400);
      expect(
        (await openSse(port, `/streams/${id}/answer`, { 'last-event-id': 'later' })).status,
      ).toBe(400);
      expect((await openSse(port, `/streams/999999/answer`)).status).toBe(404);
      expect((await openSse(port, `/guarded/${id}/answer`)).status).toBe(403);
      const allowed = await openSse(port, `/guarded/${id}/answer`, { 'x-reader': 'yes' });
      await allowed.ended;
      expect(allowed.status).toBe(200);
      expect(chunksOf(allowed.events)).toEqual([{ id: '0', data: { text: 'a' } }]);
    });

    // Last: it closes the app.
    it('an app that shuts down ends its open streams without `end`, so clients reconnect', async () => {
      const parked = await engine.insert(ParkedFsm, {});
      await engine.await(parked, { timeout: 15_000 });
      const live = await openSse(port, `/streams/${parked}/answer`);
      await eventually(async () => chunksOf(live.events).length === 1);
      await app.close();
      open = false;
      await live.ended;
      expect(chunksOf(live.events)).toEqual([{ id: '0', data: 'hello\nworld' }]);
      expect(live.events.some((e) => e.event === 'end')).toBe(false);
    });
  });
}
