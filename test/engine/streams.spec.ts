import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  LeaseLostError,
  NoTargetError,
  retry,
  Step,
  type StepContext,
  type StreamChunk,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import type { SqlExecutor } from '../../lib/db/sql-executor';
import { StreamBatcher } from '../../lib/runtime/stream-batcher';
import { STREAM_APPEND } from '../../lib/sql/stream.sql';
import { bootEngine, eventually, Gates, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Durable streams (docs/streams.md): ctx.stream(name).write(chunk) appends with dense offsets,
// group-committed; engine.readStream follows until the instance ends; a reader that starts
// again from an offset gets exactly the rest; a stale writer is refused; the chunks go with
// the instance (purge, GC). On real PostgreSQL.

const gates = new Gates();
/** What steps saw of their own writes, by instance id. */
const offsetsOf = new Map<string, number[]>();
const errorsOf = new Map<string, unknown[]>();
const lateWrites = new Map<string, Promise<number>>();

type WriterState = { n: number; gate?: string; name?: string };

/** Writes `n` chunks `{ i, attempt }`, awaiting each; with a gate, half of them before it. */
@DurableFsm({ name: 'stream-writer', queue: 'streams' })
class WriterFsm {
  @Step() async start(ctx: StepContext<WriterState>) {
    const out = ctx.stream(ctx.state.name ?? 'answer');
    const half = ctx.state.gate === undefined ? ctx.state.n : Math.floor(ctx.state.n / 2);
    for (let i = 0; i < half; i++) await out.write({ i, attempt: ctx.attempt });
    if (ctx.state.gate !== undefined) await gates.wait(ctx.state.gate);
    for (let i = half; i < ctx.state.n; i++) await out.write({ i, attempt: ctx.attempt });
    return done({ wrote: ctx.state.n });
  }
}

/** Writes `n` chunks at once (Promise.all), recording the offsets they resolved with. */
@DurableFsm({ name: 'stream-burst', queue: 'streams' })
class BurstFsm {
  @Step() async start(ctx: StepContext<{ n: number }>) {
    const out = ctx.stream('tokens');
    const offsets = await Promise.all(
      Array.from({ length: ctx.state.n }, (_, i) => out.write(`token-${i}`)),
    );
    offsetsOf.set(ctx.id, offsets);
    return done({});
  }
}

/** Writes without awaiting and returns at once; optionally a chunk JSON cannot hold. */
@DurableFsm({ name: 'stream-detached', queue: 'streams' })
class DetachedFsm {
  @Step() start(ctx: StepContext<{ n: number; bad?: boolean; late?: boolean }>) {
    const out = ctx.stream('log');
    for (let i = 0; i < ctx.state.n; i++) void out.write(i);
    if (ctx.state.bad) void out.write(() => 'not json');
    if (ctx.state.late) {
      setTimeout(() => lateWrites.set(ctx.id, out.write('too late')), 20);
    }
    return done({});
  }
}

/** Writes 3 chunks per run and throws on its first run: the retry appends after them. */
@DurableFsm({ name: 'stream-retried', queue: 'streams' })
class RetriedFsm {
  @Step() async start(ctx: StepContext) {
    const out = ctx.stream('answer');
    if (ctx.attempt > 0) await out.write({ restart: ctx.attempt });
    for (let i = 0; i < 3; i++) await out.write({ i, attempt: ctx.attempt });
    if (ctx.attempt === 0) throw new Error('model hiccup');
    return done({});
  }
  onError(_err: unknown, ctx: StepContext) {
    return retry(ctx.state, 0);
  }
}

/** Writes one chunk, waits for its gate (the test fences the claim), then tries another. */
@DurableFsm({ name: 'stream-fenced', queue: 'streams' })
class FencedFsm {
  @Step() async start(ctx: StepContext<{ gate: string }>) {
    if (ctx.attempt > 0) return done({ rerun: true });
    const out = ctx.stream('answer');
    await out.write('before');
    await gates.wait(ctx.state.gate);
    try {
      await out.write('after the claim was lost');
    } catch (err) {
      errorsOf.set(ctx.id, [err]);
    }
    return done({});
  }
}

/** Streams, then parks for a signal: a follower waits past the stream's last chunk. */
@DurableFsm({ name: 'stream-parked', queue: 'streams' })
class ParkedFsm {
  @Step() async start(ctx: StepContext) {
    await ctx.stream('answer').write('hello');
    return awaitSignal('approved', 'finish', ctx.state);
  }
  @Step() async finish(ctx: StepContext) {
    await ctx.stream('answer').write('approved');
    return done({});
  }
}

const FSMS = [WriterFsm, BurstFsm, DetachedFsm, RetriedFsm, FencedFsm, ParkedFsm];

async function collect<T>(iterable: AsyncIterable<StreamChunk<T>>): Promise<StreamChunk<T>[]> {
  const out: StreamChunk<T>[] = [];
  for await (const c of iterable) out.push(c);
  return out;
}

const offsets = (chunks: readonly StreamChunk[]): number[] => chunks.map((c) => c.offset);
const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from }, (_, i) => from + i);

describe('durable streams (docs/streams.md)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, FSMS, {
      queues: { streams: 8 },
      gc: { interval: 3_600_000, retention: 0 },
    });
  });
  afterAll(async () => {
    gates.openAll();
    await h?.close();
    await db?.drop();
  });

  const awaitDone = async (id: string): Promise<void> => {
    const answer = await h.engine.await(id, { until: 'terminal', timeout: 15_000 });
    expect(answer.kind).toBe('done');
  };
  const storedRows = async (id: string) =>
    (
      await db.pool.query<{ seq: string; chunk: unknown; claim_seq: string }>(
        `SELECT seq, chunk, claim_seq FROM gen_durable_streams WHERE instance_id = $1 ORDER BY seq`,
        [id],
      )
    ).rows;

  it('commits each write, in order, and reads them back with dense offsets', async () => {
    const id = await h.engine.insert(WriterFsm, { state: { n: 5 } });
    await awaitDone(id);
    const chunks = await collect(h.engine.readStream(id, 'answer'));
    expect(chunks).toEqual(range(0, 5).map((i) => ({ offset: i, chunk: { i, attempt: 0 } })));
    expect(await h.engine.streamInfo(id, 'answer')).toEqual({
      length: 5,
      status: 'done',
      ended: true,
    });
    // By correlation key: its instance (here the ended one that carried the key).
    const keyed = await h.engine.insert(WriterFsm, { state: { n: 2 }, correlationKey: 'talk:1' });
    await awaitDone(keyed);
    expect(
      offsets(await collect(h.engine.readStream({ correlationKey: 'talk:1' }, 'answer'))),
    ).toEqual([0, 1]);
    expect(await h.engine.streamInfo({ correlationKey: 'talk:1' }, 'answer')).toMatchObject({
      length: 2,
    });
    // A stream never written is empty; its instance's end ends it at once.
    expect(await collect(h.engine.readStream(id, 'other'))).toEqual([]);
    expect(await h.engine.streamInfo({ id }, 'other')).toMatchObject({ length: 0 });
  });

  it('a lone write is one statement; concurrent writes are group-committed', async () => {
    h.clear();
    const lone = await h.engine.insert(WriterFsm, { state: { n: 3 } });
    await awaitDone(lone);
    // Each awaited write of a step alone on the node: its own statement, written at once.
    expect(h.statements.filter((s) => s === 'stream_append')).toHaveLength(3);

    h.clear();
    const burst = await h.engine.insert(BurstFsm, { state: { n: 200 } });
    await awaitDone(burst);
    expect(offsetsOf.get(burst)).toEqual(range(0, 200));
    const appends = h.statements.filter((s) => s === 'stream_append').length;
    expect(appends).toBeGreaterThanOrEqual(1);
    expect(appends).toBeLessThanOrEqual(3);

    // Many steps at once, each writing many chunks: far fewer statements than writes.
    h.clear();
    const ids = await Promise.all(
      Array.from({ length: 8 }, () => h.engine.insert(BurstFsm, { state: { n: 25 } })),
    );
    for (const id of ids) await awaitDone(id);
    for (const id of ids) expect(offsetsOf.get(id)).toEqual(range(0, 25));
    expect(h.statements.filter((s) => s === 'stream_append').length).toBeLessThan(200 / 5);
    for (const id of ids) {
      const read = await collect(h.engine.readStream(id, 'tokens'));
      expect(read.map((c) => c.chunk)).toEqual(range(0, 25).map((i) => `token-${i}`));
    }
  });

  it('follows chunks written after the reader started, on this node and on another, and ends with the instance', async () => {
    const other = await bootEngine(db, [], {
      name: 'reader',
      queues: {},
      reaper: false,
      gc: false,
    });
    try {
      const id = await h.engine.insert(WriterFsm, { state: { n: 6, gate: 'follow' } });
      const here: StreamChunk[] = [];
      const there: StreamChunk[] = [];
      const reading = (async () => {
        for await (const c of h.engine.readStream(id, 'answer')) here.push(c);
      })();
      const readingThere = (async () => {
        for await (const c of other.engine.readStream(id, 'answer')) there.push(c);
      })();
      await gates.reached('follow');
      await eventually(async () => here.length === 3 && there.length === 3);
      await sleep(100);
      // Both readers wait: the instance is live, the rest is not written yet.
      expect(offsets(here)).toEqual([0, 1, 2]);
      expect(offsets(there)).toEqual([0, 1, 2]);
      gates.open('follow');
      await Promise.all([reading, readingThere]);
      expect(offsets(here)).toEqual(range(0, 6));
      expect(there).toEqual(here);
      expect((await h.engine.get(id))?.status).toBe('done');
    } finally {
      await other.close();
    }
  });

  it('a reader that starts again from an offset gets exactly the rest; follow: false reads what is committed', async () => {
    const id = await h.engine.insert(WriterFsm, { state: { n: 10 } });
    await awaitDone(id);
    const all = await collect(h.engine.readStream(id, 'answer'));
    const first = await collect(h.engine.readStream(id, 'answer', { from: 0, follow: false }));
    expect(first).toEqual(all);
    for (const from of [1, 4, 9, 10, 25]) {
      const rest = await collect(h.engine.readStream(id, 'answer', { from }));
      expect(rest).toEqual(all.slice(from));
    }
    // Live instance, follow: false: the committed chunks, then the end, without waiting.
    const parked = await h.engine.insert(ParkedFsm, {});
    await h.engine.await(parked, { timeout: 15_000 });
    expect(await collect(h.engine.readStream(parked, 'answer', { follow: false }))).toEqual([
      { offset: 0, chunk: 'hello' },
    ]);
    // It ended while the instance is still live: it did not wait for more.
    expect((await h.engine.get(parked))?.status).toBe('awaiting_signal');
    await h.engine.signal(parked, 'approved', {});
    await awaitDone(parked);
  });

  it('a follower waits past the last chunk of a parked instance, and an abort signal ends it', async () => {
    const id = await h.engine.insert(ParkedFsm, {});
    await h.engine.await(id, { timeout: 15_000 });
    const controller = new AbortController();
    const got: StreamChunk[] = [];
    const reading = (async () => {
      for await (const c of h.engine.readStream(id, 'answer', { signal: controller.signal })) {
        got.push(c);
      }
    })();
    await eventually(async () => got.length === 1);
    await sleep(100);
    controller.abort();
    await reading;
    expect(got).toEqual([{ offset: 0, chunk: 'hello' }]);
    // Signalled: the next step writes on, and a reader from offset 1 sees it and the end.
    const rest = collect(h.engine.readStream(id, 'answer', { from: 1 }));
    await h.engine.signal(id, 'approved', {});
    expect(await rest).toEqual([{ offset: 1, chunk: 'approved' }]);
  });

  it('writes a step does not await commit before its outcome; a failed one fails the step; a late one is refused', async () => {
    const id = await h.engine.insert(DetachedFsm, { state: { n: 20 } });
    await awaitDone(id);
    // The end is visible only after every chunk: nothing to wait for once it is done.
    expect(await h.engine.streamInfo(id, 'log')).toMatchObject({ length: 20, ended: true });
    expect((await storedRows(id)).map((r) => Number(r.seq))).toEqual(range(0, 20));

    const bad = await h.engine.insert(DetachedFsm, { state: { n: 2, bad: true } });
    const answer = await h.engine.await(bad, { until: 'terminal', timeout: 15_000 });
    expect(answer.kind).toBe('failed');
    expect((await h.engine.get(bad))?.lastError).toMatch(/ctx\.stream\("log"\)\.write\.chunk/);
    expect(await h.engine.streamInfo(bad, 'log')).toMatchObject({ length: 2 });

    const late = await h.engine.insert(DetachedFsm, { state: { n: 1, late: true } });
    await awaitDone(late);
    await eventually(async () => lateWrites.has(late));
    await expect(lateWrites.get(late)).rejects.toBeInstanceOf(InvalidInputError);
    expect(await h.engine.streamInfo(late, 'log')).toMatchObject({ length: 1 });
  });

  it('a step that runs again appends after the chunks its earlier run committed', async () => {
    const id = await h.engine.insert(RetriedFsm, {});
    await awaitDone(id);
    const chunks = await collect(h.engine.readStream(id, 'answer'));
    expect(chunks).toEqual([
      { offset: 0, chunk: { i: 0, attempt: 0 } },
      { offset: 1, chunk: { i: 1, attempt: 0 } },
      { offset: 2, chunk: { i: 2, attempt: 0 } },
      { offset: 3, chunk: { restart: 1 } },
      { offset: 4, chunk: { i: 0, attempt: 1 } },
      { offset: 5, chunk: { i: 1, attempt: 1 } },
      { offset: 6, chunk: { i: 2, attempt: 1 } },
    ]);
    // Each chunk records the claim it was written under; the retry's claim is a later one.
    const claims = (await storedRows(id)).map((r) => Number(r.claim_seq));
    expect(new Set(claims.slice(0, 3)).size).toBe(1);
    expect(new Set(claims.slice(3)).size).toBe(1);
    expect(claims[3]!).toBeGreaterThan(claims[0]!);
  });

  it('refuses a writer whose claim was lost: LeaseLostError, nothing written', async () => {
    h.clear();
    const id = await h.engine.insert(FencedFsm, { state: { gate: 'fenced' } });
    await gates.reached('fenced');
    // Fence the claim as a reap and re-claim would.
    await db.pool.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [id]);
    gates.open('fenced');
    await eventually(async () => errorsOf.has(id));
    expect(errorsOf.get(id)![0]).toBeInstanceOf(LeaseLostError);
    expect(h.eventsOf('stream:refused', id)).toHaveLength(1);
    expect((await storedRows(id)).map((r) => r.chunk)).toEqual(['before']);
  });

  it('an append is fenced by claim, ordered by claim, and idempotent when retried', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, claim_seq, lease_expires_at)
       VALUES ('by-hand', 'start', 'nobody', 'executing', 'w-1', 5, now() + interval '1 hour')
       RETURNING id`,
    );
    const id = rows[0]!.id;
    const sql = h.engine.runtime.sql;
    const write = (chunk: string, claimSeq = '5', worker = 'w-1', name = 's') => ({
      id,
      claimSeq,
      worker,
      name,
      chunk: JSON.stringify(chunk),
    });
    // Two streams in one statement, offsets per stream in write order.
    expect(
      await STREAM_APPEND.run(sql, {
        batch: 'b1',
        writes: [write('a'), write('x', '5', 'w-1', 't'), write('b'), write('c')],
      }),
    ).toEqual([0, 0, 1, 2]);
    // The same statement again (its answer was lost): answered, not applied twice.
    expect(
      await STREAM_APPEND.run(sql, {
        batch: 'b1',
        writes: [write('a'), write('x', '5', 'w-1', 't'), write('b'), write('c')],
      }),
    ).toEqual([0, 0, 1, 2]);
    // Another worker, an older or newer claim than the row's: refused.
    expect(
      await STREAM_APPEND.run(sql, {
        batch: 'b2',
        writes: [write('d', '5', 'w-2'), write('e', '4'), write('f', '6'), write('g')],
      }),
    ).toEqual([null, null, null, 3]);
    // A later claim appended to the stream: the older claim's writes no longer land there.
    await db.pool.query(
      `UPDATE gen_durable_stream_heads SET claim_seq = 6 WHERE instance_id = $1 AND name = 's'`,
      [id],
    );
    expect(await STREAM_APPEND.run(sql, { batch: 'b3', writes: [write('h')] })).toEqual([null]);
    expect(
      (await storedRows(id)).map((r) => [Number(r.seq), r.chunk]).filter(([, c]) => c !== 'x'),
    ).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
      [3, 'g'],
    ]);
    await db.pool.query(`UPDATE gen_durable SET status = 'failed' WHERE id = $1`, [id]);
  });

  it('a retried append whose first attempt committed (its answer lost) writes nothing twice', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, claim_seq, lease_expires_at)
       VALUES ('by-hand', 'start', 'nobody', 'executing', 'w-r', 9, now() + interval '1 hour')
       RETURNING id`,
    );
    const id = rows[0]!.id;
    const real = h.engine.runtime.sql;
    let calls = 0;
    // The first statement commits, then its connection "dies" before the answer arrives.
    const flaky = {
      queryResult: async (...args: Parameters<SqlExecutor['queryResult']>) => {
        const result = await real.queryResult(...args);
        if (++calls === 1) throw new Error('Connection terminated unexpectedly');
        return result;
      },
    } as unknown as SqlExecutor;
    const batcher = new StreamBatcher(flaky, h.engine.runtime.telemetry, () => undefined, 5_000);
    const write = (chunk: string) =>
      batcher.append({
        id,
        claimSeq: '9',
        worker: 'w-r',
        name: 's',
        chunk: JSON.stringify(chunk),
        fsm: 'by-hand',
        step: 'start',
      });
    expect(await Promise.all([write('a'), write('b'), write('c')])).toEqual([0, 1, 2]);
    expect(calls).toBe(3); // a alone, its retry, then b and c together
    expect((await storedRows(id)).map((r) => [Number(r.seq), r.chunk])).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
    ]);
    await db.pool.query(`UPDATE gen_durable SET status = 'failed' WHERE id = $1`, [id]);
  });

  it('checks its arguments; an unknown instance is NoTargetError', async () => {
    expect(() => h.engine.readStream('1', '')).toThrow(InvalidInputError);
    expect(() => h.engine.readStream('1', 'a', { from: -1 })).toThrow(InvalidInputError);
    expect(() => h.engine.readStream('1', 'a', { from: 1.5 })).toThrow(InvalidInputError);
    expect(() => h.engine.readStream('1', 'a', { follow: 'yes' as unknown as boolean })).toThrow(
      InvalidInputError,
    );
    expect(() => h.engine.readStream('x', 'a')).toThrow(InvalidInputError);
    expect(() => h.engine.readStream('1', 'a', { nope: 1 } as never)).toThrow(InvalidInputError);
    await expect(collect(h.engine.readStream('999999', 'a'))).rejects.toBeInstanceOf(NoTargetError);
    await expect(h.engine.streamInfo('999999', 'a')).rejects.toBeInstanceOf(NoTargetError);
    await expect(h.engine.streamInfo('1', 'x'.repeat(201))).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });

  it('the client reads and follows a stream by polling', async () => {
    const client = new GenDurableClient(db.pool);
    try {
      const id = await h.engine.insert(WriterFsm, { state: { n: 4, gate: 'client' } });
      const got: StreamChunk[] = [];
      const reading = (async () => {
        for await (const c of client.readStream(id, 'answer')) got.push(c);
      })();
      await gates.reached('client');
      await eventually(async () => got.length === 2);
      gates.open('client');
      await reading;
      expect(offsets(got)).toEqual([0, 1, 2, 3]);
      expect(await client.streamInfo(id, 'answer')).toMatchObject({ length: 4, ended: true });
    } finally {
      await client.close();
    }
  });

  it('the chunks go with their instance: purge, GC, and a follower of a deleted instance ends', async () => {
    const purged = await h.engine.insert(WriterFsm, { state: { n: 3 } });
    await awaitDone(purged);
    expect(await storedRows(purged)).toHaveLength(3);
    await h.engine.purge(purged);
    expect(await storedRows(purged)).toHaveLength(0);
    const heads = async (id: string) =>
      (await db.pool.query(`SELECT 1 FROM gen_durable_stream_heads WHERE instance_id = $1`, [id]))
        .rowCount;
    expect(await heads(purged)).toBe(0);
    await expect(collect(h.engine.readStream(purged, 'answer'))).rejects.toBeInstanceOf(
      NoTargetError,
    );

    // A follower of a parked instance that is cancelled and purged ends with what it read.
    const parked = await h.engine.insert(ParkedFsm, {});
    await h.engine.await(parked, { timeout: 15_000 });
    const got: StreamChunk[] = [];
    const reading = (async () => {
      for await (const c of h.engine.readStream(parked, 'answer')) got.push(c);
    })();
    await eventually(async () => got.length === 1);
    await h.engine.cancel(parked);
    await h.engine.purge(parked);
    await reading;
    expect(got).toEqual([{ offset: 0, chunk: 'hello' }]);

    const collected = await h.engine.insert(WriterFsm, { state: { n: 3 } });
    await awaitDone(collected);
    expect(await storedRows(collected)).toHaveLength(3);
    await h.engine.runtime.gc!.sweep();
    expect(await storedRows(collected)).toHaveLength(0);
    expect(await heads(collected)).toBe(0);
  });
});
