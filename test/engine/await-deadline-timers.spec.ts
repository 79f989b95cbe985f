import { awaitSignal, done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Await timeouts on time (docs/design.md §8.5): the node that parks an instance with a timeout
// within its poll horizon arms a local timer, which fires the deadline when it is due and pokes
// the queue; the reaper's sweep stays the floor for everything else. Here no node runs a
// reaper, so only the local timer can fire the timeout.

@DurableFsm({ name: 'deadline-timer', queue: 'deadline-timer' })
class DeadlineTimerFsm {
  @Step() start(ctx: StepContext<{ timeout: number }>) {
    return awaitSignal('paid', 'woke', ctx.state, { timeout: ctx.state.timeout });
  }
  @Step() woke(ctx: StepContext<{ timeout: number }>) {
    return done({ awaited: ctx.awaited.length });
  }
}

describe('await timeouts fired by the parking node', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [DeadlineTimerFsm], {
      queues: { 'deadline-timer': 2 },
      reaper: false,
      poke: 'local',
    });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('fires a 300 ms await timeout with no reaper anywhere', async () => {
    const id = await t.engine.insert(DeadlineTimerFsm, { state: { timeout: 300 } });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { awaited: 0 },
    });
    expect(t.eventsOf('await:timeout').length).toBeGreaterThanOrEqual(1);
    expect(t.statements).toContain('fire_await_deadlines');
  });

  it('a signal before the deadline wins, and the timer then fires nothing', async () => {
    t.clear();
    const id = await t.engine.insert(DeadlineTimerFsm, { state: { timeout: 400 } });
    await t.waitFor('step:stop', (e) => e.metadata['id'] === id);
    await t.engine.signal({ id }, 'paid', { ok: true });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 15_000 })).toEqual({
      kind: 'done',
      result: { awaited: 1 },
    });
    // Past the deadline the timer runs its statement and finds nothing overdue.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(t.eventsOf('await:timeout')).toEqual([]);
  });
});
