import type { InsertRow } from '../../lib/instance/insert-row';
import {
  INSERT_INSTANCES,
  INSERT_UNKEYED_INSTANCES,
  insertInstances,
  type InsertManyInput,
} from '../../lib/sql/insert.sql';
import { poolRunner } from '../chaos/support/race-fixtures';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §26.11: a batch with no correlation key is written by INSERT_UNKEYED_INSTANCES,
// a plain INSERT … SELECT whose ordinals come from the drawn ids. It must write exactly what
// INSERT_INSTANCES writes for the same entries, and answer each entry's own id.

/** Every column a later read could see, minus those that differ between two inserts. */
const COLUMNS = `fsm, fsm_version, step, status, state, queue, priority, concurrency_key, concurrency_name,
  rate_limit, weight, parent_id, correlation_key, correlation_scope, correlation_guard, trace_context,
  held_at IS NOT NULL AS held, dedup_until, fairness_key, fairness_weight, sequence_key, on_head_failure,
  attempt, children_pending, claim_seq,
  CASE WHEN eligible_at < '2030-01-01' THEN round(extract(epoch FROM eligible_at - inserted_at) * 1000)::int END AS delay_ms,
  CASE WHEN deadline_at < '2030-01-01' THEN round(extract(epoch FROM deadline_at - inserted_at) * 1000)::int END AS deadline_ms,
  deadline_at = '2031-02-03T04:05:06Z' AS absolute_deadline,
  eligible_at = '2030-01-01T00:00:00Z' AS absolute_run_at`;

const base = (over: Partial<InsertRow>): InsertRow => ({
  fsm: 'unkeyed',
  fsmVersion: 2,
  step: 'start',
  stateText: '{"n":0}',
  queue: 'unkeyed-q',
  priority: 0,
  at: null,
  delayMs: 0,
  correlationKey: null,
  scope: 'runnable,executing',
  concurrencyKey: null,
  rateLimit: null,
  weight: 1,
  ...over,
});

/** One entry of each shape an unkeyed batch carries. */
function entries(tag: string): InsertRow[] {
  return [
    base({ stateText: `{"tag":"${tag}","n":0}` }),
    base({ stateText: `{"tag":"${tag}","n":1}`, priority: -3, delayMs: 60_000 }),
    base({ stateText: `{"tag":"${tag}","n":2}`, at: new Date('2030-01-01T00:00:00Z') }),
    base({
      stateText: `{"tag":"${tag}","n":3}`,
      concurrencyKey: 'pool:7',
      rateLimit: 'api',
      weight: 2.5,
    }),
    base({ stateText: `{"tag":"${tag}","n":4}`, held: true, traceContext: '00-abc-def-01' }),
    base({ stateText: `{"tag":"${tag}","n":5}`, deadlineInMs: 90_000 }),
    base({ stateText: `{"tag":"${tag}","n":6}`, deadlineAt: new Date('2031-02-03T04:05:06Z') }),
    base({ stateText: `{"tag":"${tag}","n":7}`, fairnessKey: 'tenant-a', fairnessWeight: 3 }),
    base({ stateText: `{"tag":"${tag}","n":8}`, sequenceKey: `seq-${tag}`, onHeadFailure: 'skip' }),
    base({ stateText: `{"tag":"${tag}","n":9}`, queue: 'other-q' }),
  ];
}

describe('INSERT_UNKEYED_INSTANCES (an unkeyed batch)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  async function written(ids: readonly string[]): Promise<Array<Record<string, unknown>>> {
    const { rows } = await db.pool.query(
      `SELECT ${COLUMNS} FROM gen_durable WHERE id = ANY($1::bigint[]) ORDER BY array_position($1::bigint[], id)`,
      [ids],
    );
    return rows as Array<Record<string, unknown>>;
  }

  it('writes every column as INSERT_INSTANCES does, parents included, each entry under its own id', async () => {
    const [parent] = await INSERT_INSTANCES.run(poolRunner(db.pool), { rows: [base({})] });
    const parentIds = [parent!.id, null, parent!.id];
    const keyedInput: InsertManyInput = { rows: entries('same'), parentIds };
    const unkeyedInput: InsertManyInput = { rows: entries('same'), parentIds };
    const keyed = await INSERT_INSTANCES.run(poolRunner(db.pool), keyedInput);
    const unkeyed = await INSERT_UNKEYED_INSTANCES.run(poolRunner(db.pool), unkeyedInput);

    expect(unkeyed.map((r) => r.ord)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(unkeyed.map(({ id: _id, ...rest }) => rest)).toEqual(
      keyed.map(({ id: _id, ...rest }) => rest),
    );
    const fromKeyed = await written(keyed.map((r) => r.id));
    const fromUnkeyed = await written(unkeyed.map((r) => r.id));
    expect(fromUnkeyed).toEqual(fromKeyed);
    // Each answered id is its entry's row: the state says which entry it was.
    const { rows } = await db.pool.query(
      `SELECT id::text, (state->>'n')::int AS n FROM gen_durable WHERE id = ANY($1::bigint[])`,
      [unkeyed.map((r) => r.id)],
    );
    const entryOf = new Map((rows as Array<{ id: string; n: number }>).map((r) => [r.id, r.n]));
    expect(unkeyed.map((r) => entryOf.get(r.id))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // Due: runnable now and not held (entries 0, 3, 5–9; 1 is delayed, 2 in 2030, 4 held).
    expect(unkeyed.map((r) => r.due)).toEqual([
      true,
      false,
      false,
      true,
      false,
      true,
      true,
      true,
      true,
      true,
    ]);
  });

  it('keeps the ordinals under concurrent batches drawing from the same sequence', async () => {
    const batches = Array.from({ length: 8 }, (_, b) =>
      Array.from({ length: 200 }, (_, i) => base({ stateText: `{"b":${b},"n":${i}}` })),
    );
    const answers = await Promise.all(
      batches.map((rows) => INSERT_UNKEYED_INSTANCES.run(poolRunner(db.pool), { rows })),
    );
    const ids = answers.flat().map((r) => r.id);
    const { rows } = await db.pool.query(
      `SELECT id::text, (state->>'b')::int AS b, (state->>'n')::int AS n FROM gen_durable WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    const byId = new Map(
      (rows as Array<{ id: string; b: number; n: number }>).map((r) => [r.id, r]),
    );
    answers.forEach((answer, b) => {
      expect(answer).toHaveLength(200);
      answer.forEach((r, i) => expect(byId.get(r.id)).toEqual({ id: r.id, b, n: i }));
    });
  });

  it('insertInstances takes the unkeyed statement only when no entry has a key', async () => {
    const names: string[] = [];
    const runner = poolRunner(db.pool);
    const spy = {
      queryResult: (
        statement: Parameters<typeof runner.queryResult>[0],
        values: readonly unknown[],
      ) => {
        names.push(statement.name);
        return runner.queryResult(statement, values);
      },
    };
    await insertInstances(spy, { rows: [base({}), base({})] });
    await insertInstances(spy, { rows: [base({}), base({ correlationKey: 'k-unkeyed-spec' })] });
    expect(names).toEqual(['insert_unkeyed_instances', 'insert_instances']);
  });
});
