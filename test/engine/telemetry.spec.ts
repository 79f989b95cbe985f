import { Logger } from '@nestjs/common';

import {
  done,
  DurableFsm,
  type GenDurableEvent,
  type GenDurableEventName,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { subscribeChannels } from '../support/channel-subscription';
import { bootEngine, eventually, Gates, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §20, §26.3, §26.4: every event this parts emit reaches both diagnostics_channel
// (`gen_durable:<event>`) and events$, with its measurements and metadata; subscriber errors
// never reach the engine. Faults are real: a stale claim, an unknown FSM, a flush that
// PostgreSQL refuses (a trigger), synchronous_commit off for the database.

const EVENTS: GenDurableEventName[] = [
  'step:stop',
  'pick:stop',
  'scheduler:saturation',
  'scheduler:drain',
  'scheduler:reclaimed',
  'outcome:stale',
  'reaper:reaped',
  'executor:crash',
  'flush:error',
  'boot:warning',
];

const gates = new Gates();

@DurableFsm({ name: 'observed', queue: 'tel' })
class ObservedFsm {
  @Step() async start(ctx: StepContext<{ mode: 'plain' | 'gated' | 'poison' | 'flaky' }>) {
    if (ctx.state.mode === 'gated') await gates.wait(`${ctx.id}:${ctx.attempt}`);
    if (ctx.state.mode === 'poison') return next('finish', { poison: true });
    if (ctx.state.mode === 'flaky') return next('finish', { flaky: true });
    return done({ attempt: ctx.attempt });
  }
  @Step() finish() {
    return done({ finished: true });
  }
}

describe('telemetry (docs/design.md §20)', () => {
  let db: TestDatabase;
  let h: Harness;
  const published: GenDurableEvent[] = [];
  const onMessage = (message: unknown) => published.push(message as GenDurableEvent);
  const throwing = () => {
    throw new Error('a broken events$ subscriber');
  };
  const loggedErrors: string[] = [];
  let errorSpy: jest.SpyInstance;
  let seeded = '';
  let subscription: { unsubscribe(): void } | undefined;

  beforeAll(async () => {
    // Not a bare subscribe(): Node 20's channel registry can lose a fresh subscription to a late
    // finalizer of a channel an earlier test file created (a flake seen in CI).
    subscription = await subscribeChannels(
      EVENTS.map((name) => `gen_durable:${name}`),
      onMessage,
    );
    db = await createTestDatabase();
    // §26.4: acknowledged writes are not durable with synchronous_commit off: warn at boot.
    await db.pool.query(`ALTER DATABASE ${db.name} SET synchronous_commit = off`);
    // A dead predecessor's claim under this node's prefix, for scheduler:reclaimed. Its lease
    // runs for an hour: the startup reclaim takes it (the node's liveness lock says the
    // predecessor is gone), never the reaper, which starts first and, on a loaded machine, once
    // swept an already expired seed before the scheduler's reclaim ran.
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, lease_expires_at, claim_seq, state)
       VALUES ('observed', 'start', 'tel', 'executing', 'GenDurable:tel@tel-node-0dead000',
               now() + interval '1 hour', 1, '{"mode":"plain"}')
       RETURNING id`,
    );
    seeded = rows[0]!.id;
    // A flush PostgreSQL refuses: any transition to a state holding "poison" raises.
    await db.pool.query(`
      CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.state ? 'poison' THEN RAISE EXCEPTION 'poisoned state refused by trigger'; END IF;
        IF NEW.state ? 'flaky' AND nextval('flaky_failures') <= 2 THEN
          RAISE EXCEPTION 'transient serialization failure' USING ERRCODE = '40001';
        END IF;
        RETURN NEW;
      END $$`);
    await db.pool.query(`CREATE SEQUENCE flaky_failures`);
    await db.pool.query(
      `CREATE TRIGGER refuse_poison BEFORE UPDATE ON gen_durable FOR EACH ROW EXECUTE FUNCTION refuse_poison()`,
    );
    errorSpy = jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => {
      loggedErrors.push(String(message));
    });
    h = await bootEngine(db, [ObservedFsm], {
      queues: { tel: 3 },
      nodeId: 'tel-node',
      reaper: { interval: 100 },
      gc: false,
    });
    h.engine.events$.subscribe(throwing);
    h.engine.events$.subscribe({ next: throwing });
  });

  afterAll(async () => {
    gates.openAll();
    await h?.close();
    subscription?.unsubscribe();
    errorSpy.mockRestore();
    await db.drop();
  });

  /** The event on both transports, identical. */
  async function both(
    name: GenDurableEventName,
    match: (e: GenDurableEvent) => boolean = () => true,
  ): Promise<GenDurableEvent> {
    const viaEvents = await h.waitFor(name, match);
    const viaChannel = await eventually(async () =>
      published.find((e) => e.event === name && match(e)),
    );
    expect(viaChannel).toEqual(viaEvents);
    expect(viaEvents.engine).toBe('GenDurable');
    expect(typeof viaEvents.at).toBe('number');
    return viaEvents;
  }

  it('boot:warning when synchronous_commit is off; scheduler:reclaimed at start', async () => {
    const warning = await both('boot:warning', (e) =>
      String(e.metadata['warning']).includes('synchronous_commit'),
    );
    expect(warning.measurements).toEqual({ count: 1 });
    const reclaimed = await both('scheduler:reclaimed');
    expect(reclaimed).toMatchObject({ measurements: { count: 1 }, metadata: { queue: 'tel' } });
    expect(await h.engine.await(seeded, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { attempt: 0 },
    });
  });

  it('step:stop, pick:stop and scheduler:saturation while rows run', async () => {
    const id = await h.engine.insert(ObservedFsm, { state: { mode: 'plain' } });
    await h.engine.await(id, { until: 'terminal' });
    const step = await both('step:stop', (e) => e.metadata['id'] === id);
    expect(step.metadata).toEqual({ id, fsm: 'observed', step: 'start', kind: 'done' });
    expect(step.measurements['durationMs']).toBeGreaterThanOrEqual(0);
    const pick = await both('pick:stop', (e) => e.measurements['count']! > 0);
    expect(pick.metadata).toEqual({
      queue: 'tel',
      worker: h.engine.runtime.schedulers.get('tel')?.workerId,
    });
    expect(pick.measurements['demand']).toBeGreaterThanOrEqual(pick.measurements['count']!);
    const saturation = await both('scheduler:saturation');
    expect(saturation.metadata).toEqual({ queue: 'tel' });
    expect(Object.keys(saturation.measurements).sort()).toEqual([
      'awaitingCommit',
      'buffer',
      'concurrency',
      'inFlight',
      'prefetch',
    ]);
    expect(saturation.measurements['concurrency']).toBe(3);
  });

  it('reaper:reaped and outcome:stale when a claim is lost mid-step', async () => {
    const id = await h.engine.insert(ObservedFsm, { state: { mode: 'gated' } });
    await gates.reached(`${id}:0`);
    // Expire the lease until the reaper (every 100 ms) wins against the heartbeat (500 ms).
    await eventually(async () => {
      await db.pool.query(
        `UPDATE gen_durable SET lease_expires_at = now() - interval '1 second' WHERE id = $1 AND attempt = 0`,
        [id],
      );
      return (await rowOf(db, id))['attempt'] === 1;
    });
    const reaped = await both('reaper:reaped');
    expect(reaped.measurements['count']).toBeGreaterThanOrEqual(1);
    gates.open(`${id}:1`);
    gates.open(`${id}:0`);
    const stale = await both('outcome:stale', (e) => e.metadata['id'] === id);
    expect(stale).toMatchObject({
      measurements: { count: 1 },
      metadata: { id, fsm: 'observed', step: 'start', kind: 'done' },
    });
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { attempt: 1 },
    });
  });

  it('executor:crash for an FSM this node does not know', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue) VALUES ('ghost', 'start', 'tel') RETURNING id`,
    );
    const crash = await both('executor:crash', (e) => e.metadata['id'] === rows[0]!.id);
    expect(crash).toMatchObject({
      measurements: { count: 1 },
      metadata: { fsm: 'ghost', step: 'start' },
    });
  });

  it('flush:error (and executor:crash) when PostgreSQL refuses the flush; the row stays executing', async () => {
    const id = await h.engine.insert(ObservedFsm, { state: { mode: 'poison' } });
    const error = await both('flush:error', (e) =>
      String(e.metadata['error']).includes('poisoned state refused'),
    );
    expect(error.measurements['count']).toBeGreaterThanOrEqual(1);
    await both(
      'executor:crash',
      (e) => e.metadata['id'] === id && e.metadata['error'] === 'flush failed',
    );
    expect(await rowOf(db, id)).toMatchObject({ status: 'executing', step: 'start' });
  });

  it('a transient flush failure is retried within the flush (no flush:error)', async () => {
    h.clear();
    const id = await h.engine.insert(ObservedFsm, { state: { mode: 'flaky' } });
    expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { finished: true },
    });
    const { rows } = await db.pool.query(`SELECT last_value FROM flaky_failures`);
    expect(Number(rows[0].last_value)).toBeGreaterThanOrEqual(3); // two refusals, then success
    expect(
      h
        .eventsOf('flush:error')
        .filter((e) => String(e.metadata['error']).includes('serialization')),
    ).toEqual([]);
  });

  it('a throwing events$ subscriber is caught and logged; the engine carries on', async () => {
    expect(loggedErrors.some((m) => m.includes('a broken events$ subscriber'))).toBe(true);
    const ids = await h.engine.insertAll(
      ObservedFsm,
      [1, 2, 3].map(() => ({ state: { mode: 'plain' } })),
    );
    for (const id of ids) {
      expect((await h.engine.await(id, { until: 'terminal' })).kind).toBe('done');
    }
  });

  it('scheduler:drain at shutdown', async () => {
    const id = await h.engine.insert(ObservedFsm, { state: { mode: 'gated' } });
    await gates.reached(`${id}:0`);
    const closing = h.close();
    const drain = await both('scheduler:drain');
    expect(drain).toMatchObject({
      measurements: { released: 0, inFlight: 1 },
      metadata: { queue: 'tel' },
    });
    gates.open(`${id}:0`);
    await closing;
    expect(await rowOf(db, id)).toMatchObject({ status: 'done' });
  });
});
