import { transitionWrite } from '../../bench/done-writes';
import { CLAIM_RUNNABLE } from '../../lib/sql/claim.sql';
import { FLUSH_DONE, FLUSH_TRANSITIONS, type TransitionsFlush } from '../../lib/sql/outcome.sql';
import { renderStatement, type StatementRunner } from '../../lib/sql/statement';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// FLUSH_DONE (lib/sql/outcome.sql.ts), the flush of a batch whose outcomes are all `done`, on a
// real PostgreSQL: it writes exactly what FLUSH_TRANSITIONS writes for the same entries. Two
// queues get the same rows, claimed alike, then touched alike while their steps "ran": a
// cancel requested, a signal delivered, a suspect with reaps, a shard and awaits, and one row
// re-claimed by someone else (its entry is stale). One queue is flushed by FLUSH_TRANSITIONS,
// the other by FLUSH_DONE; the answers and the rows must match, column by column, in a solo
// flush (signaled rows refused) and in a flush transaction.

interface Answer {
  readonly id: string;
  readonly parentId: string | null;
  readonly status: string;
  readonly signaled: boolean;
  readonly held: boolean;
}

describe('FLUSH_DONE writes what FLUSH_TRANSITIONS writes for done outcomes', () => {
  let db: TestDatabase;
  let runner: StatementRunner;

  beforeAll(async () => {
    db = await createTestDatabase();
    runner = { queryResult: (s, v) => db.pool.query(renderStatement(s, 'public'), v as unknown[]) };
  });
  afterAll(async () => {
    await db.drop();
  });

  /** Five claimed rows of `queue`, touched as the header says; the done entries of all five. */
  async function claimedBatch(queue: string): Promise<TransitionsFlush['entries']> {
    const { rows: parent } = await db.pool.query<{ id: string }>(
      `INSERT INTO gen_durable (fsm, step, status, queue) VALUES ('p', 'wait', 'awaiting_children', $1)
       RETURNING id::text`,
      [`${queue}-parents`],
    );
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, step, queue, state, parent_id, eligible_at)
       SELECT 'f', 'a', $1, jsonb_build_object('n', i), CASE WHEN i = 1 THEN $2::bigint END,
              now() - interval '1 minute' + i * interval '1 ms'
         FROM generate_series(1, 5) i`,
      [queue, parent[0]!.id],
    );
    const { rows } = await CLAIM_RUNNABLE.run(runner, {
      queue,
      limit: 5,
      worker: 'w',
      leaseMs: 60_000,
      gates: [],
    });
    expect(rows).toHaveLength(5);
    const [a, b, c, d] = rows.map((r) => r.id);
    await db.pool.query(`UPDATE gen_durable SET cancel_requested_at = now() WHERE id = $1`, [a]);
    await db.pool.query(`UPDATE gen_durable SET signaled = true WHERE id = $1`, [b]);
    await db.pool.query(
      `UPDATE gen_durable SET reaps = 2, suspect = true, awaits = '{x}', concurrency_shard = 3 WHERE id = $1`,
      [c],
    );
    await db.pool.query(`UPDATE gen_durable SET claim_seq = claim_seq + 1 WHERE id = $1`, [d]);
    return rows.map((r, i) =>
      transitionWrite(r, { kind: 'done', resultText: JSON.stringify({ i, ok: true }) }),
    );
  }

  /**
   * Every column but those that differ between the two queues by construction (ids, queue,
   * times), with whether the row still has a lease in place of its expiry.
   */
  async function rowsOf(queue: string): Promise<Record<string, unknown>[]> {
    const { rows } = await db.pool.query<{ r: Record<string, unknown> }>(
      `SELECT to_jsonb(g) - 'id' - 'queue' - 'parent_id' - 'updated_at' - 'inserted_at'
              - 'eligible_at' - 'cancel_requested_at' - 'lease_expires_at'
              || jsonb_build_object('leased', g.lease_expires_at IS NOT NULL) AS r
         FROM gen_durable g WHERE g.queue = $1 ORDER BY g.id`,
      [queue],
    );
    return rows.map((x) => x.r);
  }

  const strip = (answers: readonly Answer[]): Omit<Answer, 'id' | 'parentId'>[] =>
    answers
      .map((a) => ({
        status: a.status,
        signaled: a.signaled,
        held: a.held,
        parent: a.parentId !== null,
      }))
      .sort(
        (x, y) => Number(x.signaled) - Number(y.signaled) || Number(x.parent) - Number(y.parent),
      )
      .map(({ status, signaled, held }) => ({ status, signaled, held }));

  it.each([true, false])('solo %s: the same answers, the same rows', async (solo) => {
    const viaTransitions = `t-${solo}`;
    const viaDone = `d-${solo}`;
    const tEntries = await claimedBatch(viaTransitions);
    const dEntries = await claimedBatch(viaDone);

    const tAnswer = (await FLUSH_TRANSITIONS.run(runner, { entries: tEntries, solo })) as Answer[];
    const dAnswer = (await FLUSH_DONE.run(runner, { entries: dEntries, solo })) as Answer[];

    // The stale entry writes nothing; a solo flush also refuses the signaled row.
    expect(dAnswer).toHaveLength(solo ? 3 : 4);
    expect(strip(dAnswer)).toEqual(strip(tAnswer));
    expect(dAnswer.every((a) => a.status === 'done' && !a.held)).toBe(true);
    // The row whose cancel was requested ends `done`: a terminal outcome wins.
    expect(await rowsOf(viaDone)).toEqual(await rowsOf(viaTransitions));
  });
});
