import { done, DurableFsm, Step } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The node's liveness lock (docs/design.md §17.3) keeps one transaction open for the node's
// lifetime. It must not hold the xmin horizon back: a pinned horizon keeps every dead row
// version of the claim's index alive (docs/performance.md "Soak"). The extended-protocol
// statement that takes the lock leaves its unnamed portal, and that portal's snapshot, open
// until the session's next message; a simple-protocol statement right after it destroys it.

@DurableFsm({ name: 'horizon-idle', queue: 'nowhere' })
class IdleFsm {
  @Step() start() {
    return done({});
  }
}

describe("the liveness lock's open transaction pins no xmin horizon", () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [IdleFsm], { queues: { idle: 1 }, reaper: false, gc: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('holds the lock in a transaction with neither an xid nor an xmin', async () => {
    const sessions = async () =>
      (
        await db.pool.query<{ xid: string | null; xmin: string | null; holds: boolean }>(
          `SELECT a.backend_xid::text AS xid, a.backend_xmin::text AS xmin,
                  EXISTS (SELECT 1 FROM pg_locks l
                           WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) AS holds
             FROM pg_stat_activity a
            WHERE a.datname = current_database() AND a.state = 'idle in transaction'`,
        )
      ).rows;
    await eventually(async () => (await sessions()).some((s) => s.holds), 10_000);
    expect((await sessions()).filter((s) => s.holds)).toEqual([
      { xid: null, xmin: null, holds: true },
    ]);
  });
});
