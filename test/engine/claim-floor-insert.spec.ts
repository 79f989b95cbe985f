import { done, DurableFsm, Step } from '../../lib';
import type { ClaimFloor } from '../../lib/runtime/claim-floor';
import type { ClaimLoop } from '../../lib/runtime/claim-loop';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// A local insert before an engaged claim floor (docs/design.md §5.3.1). Under a pinned horizon
// the floor is engaged and claims start at it; a row inserted at a more urgent priority stands
// before it, and the floor's look behind itself comes only within its budget (here ~10
// minutes). The insert puts the floor back before its poke's claim, so the row runs at once.
// The floor is engaged by hand (three slow full scans learned), as a long pin would.

const started: string[] = [];

@DurableFsm({ name: 'floor-insert-job', queue: 'floor-insert' })
class FloorInsertJob {
  @Step() async start() {
    started.push('ran');
    return done({});
  }
}

describe('an insert before the claim floor', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    // No poll for a minute: only the insert's poke claims.
    h = await bootEngine(db, [FloorInsertJob], {
      queues: { 'floor-insert': 2 },
      pollInterval: 60_000,
      maxPollInterval: 60_000,
    });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('a more urgent row inserted on this node runs at once, not at the next look behind the floor', async () => {
    const scheduler = h.engine.runtime.schedulers.get('floor-insert')!;
    const loop = (scheduler as unknown as { loop: ClaimLoop }).loop;
    // The first poll (at start) is over before the floor is engaged by hand.
    await eventually(async () => !loop.inFlight);
    const floor: ClaimFloor = loop.floor;
    for (let k = 0; k < 3; k++) {
      floor.start();
      floor.learn({ priority: 5, at: new Date() }, new Date(), true, 10_000, Date.now());
    }
    expect(floor.engaged).toBe(true);
    // The next look behind the floor is minutes away.
    expect(floor.probeDelay(Date.now())).toBeGreaterThan(60_000);

    const id = await h.engine.insert(FloorInsertJob, { priority: 0 });
    await eventually(async () => {
      const { rows } = await db.pool.query<{ status: string }>(
        `SELECT status FROM gen_durable WHERE id = $1`,
        [id],
      );
      return rows[0]!.status === 'done';
    });
    expect(started).toEqual(['ran']);
    expect(floor.engaged).toBe(true);
  });
});
