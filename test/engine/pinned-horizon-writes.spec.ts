import type { PoolClient } from 'pg';

import { HEARTBEAT, RELEASE_CLAIMS } from '../../lib/sql/lease.sql';
import { transitionWrite } from '../../bench/done-writes';
import { FLUSH_TRANSITIONS } from '../../lib/sql/outcome.sql';
import type { TypedStatement } from '../../lib/sql/statement';
import { explainBuffers } from '../support/explain-plan';
import { pinHorizon, unpinHorizon } from '../support/rows';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The statements a worker runs on the rows it holds — the flush, the heartbeat, the release —
// under a pinned xmin horizon (docs/design.md §5.3.1, docs/performance.md "Soak"). Each names
// its rows by id, and each must find them by primary key. Planned over gen_durable_lease
// instead (the rows `executing`, which the statistics say are few), each one walks every index
// entry of every claim since the pin, dead but not prunable: a 60-minute soak on PostgreSQL 18
// measured such a flush at 1.5 s and 131 000 buffers after 22 minutes of pin, and the queue's
// throughput fell to a sixth. The batch's ids pin the primary key (`g.id = ANY (ids)`).

describe('worker writes under a pinned horizon', () => {
  let db: TestDatabase;
  let client: PoolClient;
  let pin: PoolClient;
  const held: { id: string; seq: string }[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    client = await db.pool.connect();
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, status, locked_by, lease_expires_at)
       SELECT 'f', 'a', 'q', 'done', NULL, NULL FROM generate_series(1, 20000)`,
    );
    const { rows } = await db.pool.query<{ id: string; seq: string }>(
      `UPDATE gen_durable SET status = 'executing', locked_by = 'w', claim_seq = 1,
              lease_expires_at = now() + interval '1 minute'
        WHERE id IN (SELECT id FROM gen_durable ORDER BY id LIMIT 10)
        RETURNING id::text, claim_seq::text AS seq`,
    );
    held.push(...rows);
    // The statistics a fleet has most of the time: few rows executing.
    await db.pool.query('ANALYZE gen_durable');
    pin = await pinHorizon(db.pool);
    // 20 000 claims of the same worker come and go while the pin holds their versions.
    for (let round = 0; round < 4; round++) {
      await db.pool.query(
        `UPDATE gen_durable SET status = 'executing', locked_by = 'w',
                lease_expires_at = now() + make_interval(secs => $1::int)
          WHERE id > 10`,
        [round],
      );
      await db.pool.query(
        `UPDATE gen_durable SET status = 'done', locked_by = NULL, lease_expires_at = NULL WHERE id > 10`,
      );
    }
  });
  afterAll(async () => {
    await unpinHorizon(pin);
    client.release();
    await db.drop();
  });

  /** Shared buffers the statement touched, prepared and run six times (the generic plan). */
  const buffers = <I>(statement: TypedStatement<I, unknown>, input: I): Promise<number> =>
    explainBuffers(client, statement, input, {
      runs: 6,
      // Whatever the statistics say, no plan may read gen_durable_lease.
      check: (plan) => expect(plan).not.toContain('gen_durable_lease'),
    });

  it('the dead lease entries are there to be walked', async () => {
    const { rows } = await client.query<{ 'QUERY PLAN': { Plan: Record<string, number> }[] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
       SELECT count(*) FROM gen_durable WHERE status = 'executing' AND lease_expires_at > '-infinity'`,
    );
    const plan = rows[0]!['QUERY PLAN'][0]!.Plan;
    expect(plan['Shared Hit Blocks']! + plan['Shared Read Blocks']!).toBeGreaterThan(1000);
  });

  it('the flush finds its rows by primary key', async () => {
    const entries = held.map((h) =>
      transitionWrite(
        { worker: 'w', id: h.id, claimSeq: h.seq },
        { kind: 'next', nextStep: 'b', stateText: '{}' },
      ),
    );
    expect(await buffers(FLUSH_TRANSITIONS, { entries, solo: true })).toBeLessThan(300);
  });

  it('the heartbeat finds its rows by primary key', async () => {
    const rows = held.map((h) => ({ id: h.id, claimSeq: h.seq }));
    expect(await buffers(HEARTBEAT, { worker: 'w', rows, leaseMs: 30_000 })).toBeLessThan(300);
  });

  it('the release finds its rows by primary key', async () => {
    const rows = held.map((h) => ({ id: h.id, claimSeq: h.seq }));
    expect(await buffers(RELEASE_CLAIMS, { worker: 'w', rows })).toBeLessThan(300);
  });
});
