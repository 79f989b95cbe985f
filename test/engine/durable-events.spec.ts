import { Injectable } from '@nestjs/common';
import { firstValueFrom, filter, take, toArray } from 'rxjs';

import {
  DEFAULT_ENGINE_NAME,
  done,
  DurableFsm,
  type DurableEvent,
  type FinishedInstance,
  next,
  OnDurableEvent,
  Step,
  stop,
} from '../../lib';
import { postgresPokeChannel } from '../../lib/db/engine-namespace';
import { SqlExecutor } from '../../lib/db/sql-executor';
import type { FinishedAnnouncement } from '../../lib/fsm/durable-event';
import { finishedPayloads, parseFinishedPayload } from '../../lib/poke/poke-channel';
import {
  listenerConnectionOf,
  PostgresPokeTransport,
} from '../../lib/poke/postgres.poke-transport';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Listeners for finished work (docs/events.md): `@OnDurableEvent` methods on providers, called
// on the node that committed the outcome with the result or the error; `engine.finished$`, the
// ended instances of this node and, with `announceFinished`, of the others over the poke
// channel (best effort).

@DurableFsm({ name: 'evt-ok', queue: 'evt' })
class OkFsm {
  @Step() start(ctx: { state: { n: number } }) {
    return next('finish', ctx.state);
  }
  @Step() finish(ctx: { state: { n: number } }) {
    return done({ doubled: ctx.state.n * 2 });
  }
}

@DurableFsm({ name: 'evt-stop', queue: 'evt' })
class StopFsm {
  @Step() start() {
    return stop('out of stock');
  }
}

@DurableFsm({ name: 'evt-throw', queue: 'evt', maxAttempts: 1 })
class ThrowFsm {
  perform(): never {
    throw new RangeError('card declined');
  }
}

@Injectable()
class Listeners {
  readonly seen: DurableEvent[] = [];
  readonly okOnly: DurableEvent[] = [];

  @OnDurableEvent('done')
  onDone(e: DurableEvent) {
    this.seen.push(e);
  }

  @OnDurableEvent('failed')
  onFailed(e: DurableEvent) {
    this.seen.push(e);
  }

  @OnDurableEvent('step', { fsm: OkFsm })
  onOkStep(e: DurableEvent) {
    this.okOnly.push(e);
  }

  @OnDurableEvent('done')
  throws(): never {
    throw new Error('a listener that throws');
  }
}

describe('@OnDurableEvent and finished$', () => {
  let db: TestDatabase;
  let t: Harness;
  let listeners: Listeners;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [OkFsm, StopFsm, ThrowFsm, Listeners], {
      queues: { evt: 2 },
      poke: 'postgres',
      announceFinished: true,
    });
    listeners = t.app.get(Listeners);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('calls done, failed and step listeners with the result or the error, after the commit', async () => {
    const ok = await t.engine.insert(OkFsm, { state: { n: 21 } });
    const stopped = await t.engine.insert(StopFsm, {});
    const threw = await t.engine.insert(ThrowFsm, {});
    for (const id of [ok, stopped, threw]) {
      await t.engine.await(id, { until: 'terminal', timeout: 15_000 });
    }
    await eventually(async () => listeners.seen.length === 3);
    const byId = new Map(listeners.seen.map((e) => [e.id, e]));
    expect(byId.get(ok)).toMatchObject({
      kind: 'done',
      fsm: 'evt-ok',
      step: 'finish',
      outcome: 'done',
      result: { doubled: 42 },
    });
    expect(byId.get(stopped)).toMatchObject({
      kind: 'failed',
      fsm: 'evt-stop',
      step: 'start',
      error: { name: 'stop', message: 'out of stock' },
    });
    expect(byId.get(threw)).toMatchObject({
      kind: 'failed',
      fsm: 'evt-throw',
      step: 'perform',
      error: { name: 'RangeError', message: 'card declined' },
    });
    // { fsm: OkFsm } narrows the step listener to that FSM's two steps.
    await eventually(async () => listeners.okOnly.length === 2);
    expect(listeners.okOnly.map((e) => [e.step, e.outcome])).toEqual([
      ['start', 'next'],
      ['finish', 'done'],
    ]);
    // The throwing listener was logged; the engine went on and the row is done.
    expect((await t.engine.get(ok))?.status).toBe('done');
  });

  it('finished$ carries this node’s endings with their result', async () => {
    const first = firstValueFrom(
      t.engine.finished$.pipe(filter((f) => f.fsm === 'evt-ok' && f.origin === 'local')),
    );
    const id = await t.engine.insert(OkFsm, { state: { n: 5 } });
    expect(await first).toEqual({
      id,
      fsm: 'evt-ok',
      step: 'finish',
      status: 'done',
      origin: 'local',
      result: { doubled: 10 },
    });
  });

  describe('across nodes, over the poke channel', () => {
    let sql: SqlExecutor;
    let other: PostgresPokeTransport;
    const heard: FinishedAnnouncement[][] = [];
    beforeAll(async () => {
      sql = new SqlExecutor(db.pool, {
        schema: 'public',
        preparedStatements: true,
        statementTimeoutMs: 5_000,
      });
      // Another node of the same engine: same channel, its own sender.
      other = new PostgresPokeTransport(sql, {
        channel: postgresPokeChannel(DEFAULT_ENGINE_NAME, 'public'),
        sender: 'other-node-0001',
        connection: listenerConnectionOf(db.pool, 'durable-events-other-node'),
        pingIntervalMs: 1_000,
        statementTimeoutMs: 2_000,
      });
      await other.start({
        poke: () => undefined,
        resync: () => undefined,
        degraded: () => undefined,
        finished: (ended) => heard.push([...ended]),
      });
    });
    afterAll(async () => {
      await other.close();
    });

    it('announces endings to the other nodes, one announcement per flush', async () => {
      const id = await t.engine.insert(StopFsm, {});
      await t.engine.await(id, { until: 'terminal', timeout: 15_000 });
      await eventually(async () => heard.flat().some((f) => f.id === id));
      expect(heard.flat().find((f) => f.id === id)).toEqual({
        id,
        fsm: 'evt-stop',
        step: 'start',
        status: 'failed',
      });
    });

    it('finished$ carries what another node announced, as remote', async () => {
      const got = firstValueFrom(
        t.engine.finished$.pipe(
          filter((f: FinishedInstance) => f.origin === 'remote'),
          take(2),
          toArray(),
        ),
      );
      other.publishFinished([
        { id: '900001', fsm: 'elsewhere', step: 'last', status: 'done' },
        { id: '900002', fsm: 'elsewhere', step: 'last', status: 'cancelled' },
      ]);
      expect(await got).toEqual([
        { id: '900001', fsm: 'elsewhere', step: 'last', status: 'done', origin: 'remote' },
        { id: '900002', fsm: 'elsewhere', step: 'last', status: 'cancelled', origin: 'remote' },
      ]);
    });
  });
});

describe('finished announcements on the wire', () => {
  it('splits a large batch under the NOTIFY limit and reads it back whole', () => {
    const ended: FinishedAnnouncement[] = Array.from({ length: 500 }, (_, i) => ({
      id: String(1_000_000 + i),
      fsm: 'an-fsm-with-a-long-name',
      step: 'a-step',
      status: 'done',
    }));
    const payloads = finishedPayloads('node-1', ended);
    expect(payloads.length).toBeGreaterThan(1);
    for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(7_000);
    expect(payloads.flatMap((p) => parseFinishedPayload(p)?.ended ?? [])).toEqual(ended);
    expect(parseFinishedPayload(payloads[0] as string)?.sender).toBe('node-1');
  });

  it('ignores pokes and malformed payloads', () => {
    expect(parseFinishedPayload('node-1|default')).toBeNull();
    expect(parseFinishedPayload('|finished|node-1|not json')).toBeNull();
    expect(parseFinishedPayload('|finished|node-1|[["1","f","s","weird"]]')).toBeNull();
  });
});
