import { done, DurableFsm, Step } from '../../lib';
import { GenDurableHealthIndicator, GenDurableHealthModule } from '../../lib/health';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// What a node knows right after boot (docs/health.md): leases a crashed predecessor left are
// reaped by a sweep at start, not one reaper interval later, so readiness is right on the first
// probe; a registered FSM whose queue this node does not run is a boot:warning and shows in
// runnableBacklog as served: false.

@DurableFsm({ name: 'served-here', queue: 'here' })
class ServedFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'served-elsewhere', queue: 'elsewhere' })
class ElsewhereFsm {
  @Step() start() {
    return done({});
  }
}

describe('readiness right after boot', () => {
  let db: TestDatabase;
  let h: Harness | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });
  afterAll(async () => {
    await db.drop();
  });

  const boot = (queues: Record<string, number>) =>
    bootEngine(
      db,
      [ServedFsm, ElsewhereFsm],
      // One sweep per minute: only a sweep at start can reap before the assertions run.
      { queues, reaper: { interval: 60_000 }, gc: false },
      { imports: [GenDurableHealthModule.forFeature()] },
    );

  it('a lease left by a crashed node is reaped at start: leaseBacklog is up on the first probe', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, lease_expires_at)
       VALUES ('served-here', 'start', 'parked', 'executing', 'crashed-node', now() - interval '1 minute')
       RETURNING id`,
    );
    const id = rows[0]!.id;
    h = await boot({ here: 1 });
    expect(h.eventsOf('reaper:reaped')).toHaveLength(1);
    expect(await rowOf(db, id)).toMatchObject({ status: 'runnable', attempt: 1, locked_by: null });
    const indicator = h.app.get(GenDurableHealthIndicator);
    expect((await indicator.leaseBacklog('leases', { graceMs: 0 })).leases).toMatchObject({
      status: 'up',
      expiredLeases: 0,
    });
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [id]);
  });

  it('a registered FSM whose queue this node does not run: boot:warning, and runnableBacklog lists it unserved', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, queue, eligible_at)
       VALUES ('served-elsewhere', 'start', 'elsewhere', now() - interval '10 minutes') RETURNING id`,
    );
    h = await boot({ here: 1 });
    const warnings = h.eventsOf('boot:warning').map((e) => String(e.metadata['warning']));
    expect(warnings).toEqual([
      'queue "elsewhere" of FSM "served-elsewhere" is not run by this node (its queues: here): its rows wait until some node runs it',
    ]);
    const indicator = h.app.get(GenDurableHealthIndicator);
    const backlog = await indicator.runnableBacklog('queues');
    expect(backlog['queues']).toMatchObject({
      status: 'up',
      queues: {
        here: { depth: 0 },
        elsewhere: { depth: 1, served: false },
      },
    });
    expect(
      (backlog['queues'] as unknown as { queues: { elsewhere: { headAgeMs: number } } }).queues
        .elsewhere.headAgeMs,
    ).toBeGreaterThan(300_000);
    expect(await rowOf(db, rows[0]!.id)).toMatchObject({ status: 'runnable' });
    await db.pool.query(`DELETE FROM gen_durable WHERE id = $1`, [rows[0]!.id]);
  });

  it('a node that runs every registered queue, or none (a web node), gets no such warning', async () => {
    h = await boot({ here: 1, elsewhere: 1 });
    expect(h.eventsOf('boot:warning')).toEqual([]);
    await h.close();
    h = await boot({});
    expect(h.eventsOf('boot:warning')).toEqual([]);
    const backlog = await h.app.get(GenDurableHealthIndicator).runnableBacklog('queues');
    expect(backlog['queues']).toMatchObject({ status: 'up', queues: {} });
  });
});
