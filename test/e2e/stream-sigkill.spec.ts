import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { EngineService, GenDurableModule, GenDurableStreamsModule } from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { eventually } from '../support/engine-harness';
import { forkWorker, killAll, type Worker } from '../support/fork-worker';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/streams.md: a real worker process streams chunks and is killed with SIGKILL mid-stream;
// a second process re-runs the step after the lease and finishes the instance. Readers that
// keep disconnecting and reconnecting with their last offset — through the client, and through
// the SSE route with Last-Event-ID — see every offset of the stream exactly once, with no gap,
// across the death of the node: the union of their reads is 0..N-1, each once.

jest.setTimeout(120_000);

const LEASE = {
  leaseTtl: 2000,
  heartbeatInterval: 500,
  pollInterval: 50,
  maxPollInterval: 200,
  drainTimeout: 5000,
};

const TOTAL = 150;
const INSTANCES = 3;

interface Token {
  i?: number;
  restart?: number;
  attempt?: number;
  worker: string;
}

/**
 * Reads `read(from)` in sessions of 1..`maxPerSession` chunks, each session starting after the
 * last offset received, until a session ends on its own (the instance ended). Answers every
 * offset received, in order, and how many sessions it took.
 */
async function reconnecting(
  read: (from: number, signal: AbortSignal) => AsyncIterable<{ offset: number; chunk: unknown }>,
  maxPerSession: number,
): Promise<{ offsets: number[]; chunks: unknown[]; sessions: number }> {
  const offsets: number[] = [];
  const chunks: unknown[] = [];
  let next = 0;
  for (let sessions = 1; ; sessions++) {
    const left = new AbortController();
    const quota = 1 + Math.floor(Math.random() * maxPerSession);
    let taken = 0;
    let cut = false;
    for await (const c of read(next, left.signal)) {
      offsets.push(c.offset);
      chunks.push(c.chunk);
      next = c.offset + 1;
      if (++taken >= quota) {
        cut = true;
        left.abort();
        break;
      }
    }
    if (!cut) return { offsets, chunks, sessions };
  }
}

/** One SSE session: the events' ids and data until the server ends it, or `quota` events. */
function sseSession(
  port: number,
  path: string,
  lastEventId: string | undefined,
  quota: number,
): Promise<{
  status: number;
  events: { id?: string; event?: string; data?: string }[];
  cut: boolean;
}> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    const req = httpRequest({ host: '127.0.0.1', port, path, headers }, (res) => {
      const events: { id?: string; event?: string; data?: string }[] = [];
      let buffer = '';
      let cut = false;
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        buffer += text;
        for (let end = buffer.indexOf('\n\n'); end >= 0 && !cut; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: { id?: string; event?: string; data?: string } = {};
          for (const line of block.split('\n')) {
            const colon = line.indexOf(':');
            if (colon <= 0) continue;
            const field = line.slice(0, colon);
            const value = line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id' || field === 'event' || field === 'data') event[field] = value;
          }
          if (event.id !== undefined || event.event !== undefined) events.push(event);
          if (events.filter((e) => e.id !== undefined).length >= quota) {
            cut = true;
            req.destroy();
          }
        }
      });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, events, cut }));
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.end();
  });
}

/** Reads over SSE in sessions like an EventSource that keeps losing its connection. */
async function sseReader(
  port: number,
  id: string,
  maxPerSession: number,
): Promise<{ offsets: number[]; sessions: number }> {
  const offsets: number[] = [];
  let last: string | undefined;
  for (let sessions = 1; ; sessions++) {
    const quota = 1 + Math.floor(Math.random() * maxPerSession);
    const session = await sseSession(port, `/durable/streams/${id}/tokens`, last, quota);
    if (session.status === 204) return { offsets, sessions };
    expect(session.status).toBe(200);
    for (const e of session.events) {
      if (e.id === undefined) continue;
      offsets.push(Number(e.id));
      last = e.id;
    }
    if (session.events.some((e) => e.event === 'end')) return { offsets, sessions };
  }
}

describe('durable streams across a SIGKILL', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let open = false;
  let port: number;
  let client: GenDurableClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    // A reader node in this process: no queues, only the SSE route over its engine.
    const dataSource = await db.dataSource();
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({ dataSource, ...LEASE, queues: {}, reaper: false, gc: false }),
        GenDurableStreamsModule.register(),
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    open = true;
    trackResource('stream reader app', () => open);
    port = (app.getHttpServer().address() as AddressInfo).port;
    client = new GenDurableClient(db.pool);
  });
  afterAll(async () => {
    await killAll();
    await client?.close();
    if (open) await app.close();
    open = false;
    await db.drop();
  });

  it('readers that reconnect with their last offset get every offset exactly once, no gap', async () => {
    const engine = app.get(EngineService);
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, state)
       SELECT 'streamer', 'start', 'streamer', jsonb_build_object('total', $1::int, 'delayMs', 8)
         FROM generate_series(1, $2::int) RETURNING id`,
      [TOTAL, INSTANCES],
    );
    const ids = rows.map((r) => r.id);

    // Readers start before any chunk exists, and keep cutting their sessions short.
    const viaClient = ids.map((id) =>
      reconnecting((from, signal) => client.readStream(id, 'tokens', { from, signal }), 25),
    );
    const viaEngine = ids.map((id) =>
      reconnecting((from, signal) => engine.readStream(id, 'tokens', { from, signal }), 40),
    );
    const viaSse = ids.map((id) => sseReader(port, id, 30));

    let a: Worker | undefined = await forkWorker('A', db.url, {
      ...LEASE,
      nodeId: 'stream-node-a',
      queues: { streamer: INSTANCES },
      reaper: false,
      gc: false,
    });
    // Mid-stream: every instance has committed a part of its chunks, none all of them.
    await eventually(
      async () => {
        const infos = await Promise.all(ids.map((id) => engine.streamInfo(id, 'tokens')));
        return infos.every((i) => i.length >= 20);
      },
      30_000,
      5,
    );
    a.child.kill('SIGKILL');
    expect(await a.exited()).toEqual({ code: null, signal: 'SIGKILL' });
    a = undefined;
    const atKill = await Promise.all(ids.map((id) => engine.streamInfo(id, 'tokens')));
    for (const info of atKill) {
      expect(info.status).toBe('executing');
      expect(info.length).toBeLessThan(TOTAL);
    }

    const b = await forkWorker('B', db.url, {
      ...LEASE,
      nodeId: 'stream-node-b',
      queues: { streamer: INSTANCES },
      reaper: { interval: 250 },
      gc: false,
    });
    try {
      const results = await Promise.all([
        Promise.all(viaClient),
        Promise.all(viaEngine),
        Promise.all(viaSse),
      ]);
      for (const id of ids) {
        expect((await engine.get(id))?.status).toBe('done');
      }
      for (const [k, id] of ids.entries()) {
        const { rows: stored } = await db.pool.query<{
          seq: string;
          chunk: Token;
          claim_seq: string;
        }>(
          `SELECT seq, chunk, claim_seq FROM gen_durable_streams
            WHERE instance_id = $1 AND name = 'tokens' ORDER BY seq`,
          [id],
        );
        const n = stored.length;
        const dense = Array.from({ length: n }, (_, i) => i);
        expect(stored.map((r) => Number(r.seq))).toEqual(dense);
        // A's part (what it committed before it died), B's restart marker, then B's whole run.
        const marker = stored.findIndex((r) => r.chunk.restart !== undefined);
        expect(marker).toBeGreaterThanOrEqual(20);
        expect(stored.slice(0, marker).every((r) => r.chunk.worker === 'A')).toBe(true);
        expect(stored.slice(0, marker).map((r) => r.chunk.i)).toEqual(
          Array.from({ length: marker }, (_, i) => i),
        );
        expect(stored[marker]!.chunk).toEqual({ restart: 1, worker: 'B' });
        expect(stored.slice(marker + 1).map((r) => [r.chunk.worker, r.chunk.i])).toEqual(
          Array.from({ length: TOTAL }, (_, i) => ['B', i]),
        );
        expect(n).toBe(marker + 1 + TOTAL);
        // Grouped by run: the claim never goes back.
        const claims = stored.map((r) => Number(r.claim_seq));
        expect(claims).toEqual([...claims].sort((x, y) => x - y));

        // Every reader: the offsets 0..n-1, each exactly once, across its sessions.
        const clientReads = results[0][k]!;
        const engineReads = results[1][k]!;
        const sseReads = results[2][k]!;
        for (const read of [clientReads, engineReads, sseReads]) {
          expect(read.offsets).toEqual(dense);
          expect(new Set(read.offsets).size).toBe(read.offsets.length);
        }
        expect(clientReads.chunks).toEqual(stored.map((r) => r.chunk));
        // They did reconnect, many times.
        expect(clientReads.sessions).toBeGreaterThan(5);
        expect(sseReads.sessions).toBeGreaterThan(5);

        // The unawaited writes of both runs committed too, dense as well.
        const ticks = await client.streamInfo(id, 'ticks');
        const { rows: tickRows } = await db.pool.query<{ seq: string }>(
          `SELECT seq FROM gen_durable_streams WHERE instance_id = $1 AND name = 'ticks' ORDER BY seq`,
          [id],
        );
        expect(tickRows.map((r) => Number(r.seq))).toEqual(
          Array.from({ length: ticks.length }, (_, i) => i),
        );
        expect(ticks.length).toBeGreaterThanOrEqual(TOTAL / 10);
      }
    } finally {
      b.child.send({ type: 'shutdown' });
      await b.exited();
    }
  });
});
