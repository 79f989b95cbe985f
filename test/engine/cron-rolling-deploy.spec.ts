import { done, DurableCron, DurableFsm, Step } from '../../lib';
import { syncDeclaredSchedules } from '../../lib/cron/schedule-sync';
import { bootEngine, type Harness, sleep } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §29, issue 18 "Done means" (rolling deploy): two engines declare different
// expressions for one schedule name and keep re-upserting their own definition (as nodes of
// two releases booting in turn) for 10 s while both tickers fire. The definition, and with it
// next_fire_at, flips back and forth; the key cron:<name>:<instant> still lets no occurrence
// fire twice.

@DurableCron('* * * * * *', { name: 'roll' })
@DurableFsm({ name: 'roll', queue: 'roll-q' })
class RollOldFsm {
  @Step() start() {
    return done({ release: 'old' });
  }
}

@DurableCron('*/2 * * * * *', { name: 'roll' })
@DurableFsm({ name: 'roll', queue: 'roll-q' })
class RollNewFsm {
  @Step() start() {
    return done({ release: 'new' });
  }
}

describe('cron during a rolling deploy (docs/design.md §29)', () => {
  let db: TestDatabase;
  let nodes: Harness[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const n of nodes) await n.close();
    await db.drop();
  });

  it('two definitions of one name fighting for 10 s fire no occurrence twice', async () => {
    const options = { queues: { 'roll-q': 2 }, reaper: false, gc: false, poke: 'none' } as const;
    nodes = [
      await bootEngine(db, [RollOldFsm], { ...options, name: 'old' }),
      await bootEngine(db, [RollNewFsm], { ...options, name: 'new' }),
    ];
    const until = Date.now() + 10_000;
    let flips = 0;
    while (Date.now() < until) {
      const node = nodes[flips % 2]!;
      await syncDeclaredSchedules(node.engine.runtime.sql, node.engine.runtime.registry, false);
      node.engine.runtime.ticker?.nudge();
      flips++;
      await sleep(300);
    }
    for (const n of nodes) await n.close();
    const { rows } = await db.pool.query<{ key: string; n: number }>(
      `SELECT correlation_key AS key, count(*)::int AS n FROM gen_durable WHERE fsm = 'roll'
        GROUP BY correlation_key ORDER BY correlation_key`,
    );
    expect(flips).toBeGreaterThan(10);
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.filter((r) => r.n > 1)).toEqual([]);
    const { rows: cron } = await db.pool.query<{ cron: string }>(
      `SELECT cron FROM gen_durable_schedules WHERE name = 'roll'`,
    );
    expect(['* * * * * *', '*/2 * * * * *']).toContain(cron[0]?.cron);
  }, 60_000);
});
