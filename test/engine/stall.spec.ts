import { done, DurableFsm, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §26.10: a step that blocks the event loop longer than heartbeatInterval stops every
// heartbeat on the process; the engine notices (scheduler:stall) and reports itself stalled.

@DurableFsm({ name: 'spinner', queue: 'stall' })
class SpinnerFsm {
  @Step() async start(ctx: StepContext<{ ms: number; spin: boolean }>) {
    if (ctx.state.spin) {
      const until = Date.now() + ctx.state.ms;
      while (Date.now() < until) {
        // CPU-bound: nothing else on this process runs meanwhile.
      }
    } else {
      await sleep(ctx.state.ms);
    }
    return done({});
  }
}

describe('event-loop stall detection (docs/design.md §26.10)', () => {
  let db: TestDatabase;
  let h: Harness;
  const HEARTBEAT = 1000;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [SpinnerFsm], {
      queues: { stall: 1 },
      leaseTtl: 6000,
      heartbeatInterval: HEARTBEAT,
      reaper: false,
      gc: false,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('a step that waits asynchronously, however long, is no stall', async () => {
    h.clear();
    const id = await h.engine.insert(SpinnerFsm, { state: { ms: 2500, spin: false } });
    expect((await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).kind).toBe('done');
    expect(h.eventsOf('scheduler:stall')).toEqual([]);
    expect(h.engine.runtime.stall.stalled).toBe(false);
  });

  it('a step that blocks the event loop longer than heartbeatInterval emits scheduler:stall', async () => {
    h.clear();
    const id = await h.engine.insert(SpinnerFsm, { state: { ms: 2500, spin: true } });
    const stall = await h.waitFor('scheduler:stall', undefined, 10_000);
    expect(stall.measurements['durationMs']).toBeGreaterThan(HEARTBEAT);
    expect(h.engine.runtime.stall.stalled).toBe(true);
    expect((await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).kind).toBe('done');
    // The mark lasts one threshold after the stall, then clears.
    await sleep(HEARTBEAT + 300);
    expect(h.engine.runtime.stall.stalled).toBe(false);
  });
});
