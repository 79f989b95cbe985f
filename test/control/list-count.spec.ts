import type { PoolClient } from 'pg';

import {
  type DurableStatus,
  DurableFsm,
  done,
  type InstanceFilter,
  InvalidInputError,
  Step,
} from '../../lib';
import type { Statement } from '../../lib/sql/statement';
import { explainRan } from '../support/explain-plan';
import { COUNT_INSTANCES, countDriver, LIST_INSTANCES, listDriver } from '../../lib/sql/query.sql';
import { resolveInstanceFilter } from '../../lib/control/instance-filter';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §27.7: list (keyset pages by id, newest first) and count (capped), every
// filter served by an index or bounded by the scan limit / cap. Rows are inserted by the
// engine and moved to other statuses by plain SQL (no scheduler runs), and every answer is
// checked against a plain SQL ground truth.

@DurableFsm({ name: 'alpha', queue: 'qa' })
class AlphaFsm {
  @Step() start() {
    return done({});
  }
}

@DurableFsm({ name: 'beta', queue: 'qb' })
class BetaFsm {
  @Step() start() {
    return done({});
  }
}

async function truth(db: TestDatabase, where: string, params: unknown[] = []): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `SELECT g.id::text AS id FROM gen_durable g WHERE ${where} ORDER BY g.id DESC`,
    params,
  );
  return rows.map((r) => r.id);
}

async function listAll(
  h: Harness,
  filter: InstanceFilter,
  page: { limit?: number; scanLimit?: number } = {},
): Promise<{ ids: string[]; calls: number }> {
  const ids: string[] = [];
  let after: string | undefined;
  let calls = 0;
  for (;;) {
    const res = await h.engine.list(filter, { ...page, ...(after ? { after } : {}) });
    calls += 1;
    ids.push(...res.items.map((i) => i.id));
    if (!res.next) return { ids, calls };
    after = res.next;
    if (calls > 10_000) throw new Error('list did not end');
  }
}

async function rejects(call: () => Promise<unknown>, path: string): Promise<InvalidInputError> {
  const err = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidInputError);
  expect((err as InvalidInputError).path).toBe(path);
  return err as InvalidInputError;
}

describe('list and count (docs/design.md §27.7)', () => {
  let db: TestDatabase;
  let h: Harness;
  let parent: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [AlphaFsm, BetaFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    await h.engine.insertAll(
      AlphaFsm,
      Array.from({ length: 60 }, (_, i) => ({
        state: { i },
        correlationKey: i % 3 === 0 ? `order:%_${i}` : `cust-${i}`,
      })),
    );
    await h.engine.insertAll(
      BetaFsm,
      Array.from({ length: 40 }, (_, i) => ({ state: { i }, queue: i % 2 ? 'qb' : 'qc' })),
    );
    // Statuses, steps, errors and one family, by plain SQL.
    await db.pool.query(
      `UPDATE gen_durable SET status = 'failed', last_error = 'Error: card declined #' || id
        WHERE fsm = 'alpha' AND id % 5 = 0`,
    );
    await db.pool.query(
      `UPDATE gen_durable SET status = 'done', step = 'finish', updated_at = now() - interval '2 hours'
        WHERE fsm = 'beta' AND id % 4 = 0`,
    );
    await db.pool.query(
      `UPDATE gen_durable SET status = 'executing', locked_by = 'w', lease_expires_at = now() + interval '1 hour'
        WHERE fsm = 'beta' AND id % 4 = 1`,
    );
    await db.pool.query(
      `UPDATE gen_durable SET inserted_at = now() - interval '3 days' WHERE fsm = 'alpha' AND id % 2 = 0`,
    );
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT min(id)::text AS id FROM gen_durable WHERE fsm = 'beta'`,
    );
    parent = rows[0]!.id;
    await db.pool.query(
      `UPDATE gen_durable SET parent_id = $1 WHERE fsm = 'beta' AND id % 3 = 0 AND id <> $1`,
      [parent],
    );
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  describe('list', () => {
    it('pages every instance newest first, without duplicates, in one statement per page', async () => {
      h.clear();
      const { ids, calls } = await listAll(h, {}, { limit: 7 });
      expect(ids).toEqual(await truth(db, 'true'));
      expect(calls).toBe(Math.ceil(100 / 7));
      expect(h.statements).toEqual(Array.from({ length: calls }, () => 'list_instances'));
      const first = await h.engine.list({}, { limit: 2 });
      expect(first.items).toHaveLength(2);
      expect(first.items[0]).toMatchObject({ fsm: 'beta', status: expect.any(String) });
      expect(first.items[0]!.insertedAt).toBeInstanceOf(Date);
    });

    const cases: [string, InstanceFilter, string, unknown[]][] = [
      ['fsm', { fsm: 'alpha' }, `fsm = 'alpha'`, []],
      ['fsm list', { fsm: ['alpha', 'beta'] }, `fsm IN ('alpha', 'beta')`, []],
      ['one status (failed: gen_durable_failed)', { status: 'failed' }, `status = 'failed'`, []],
      ['statuses', { status: ['done', 'executing'] }, `status IN ('done', 'executing')`, []],
      ['queue', { queue: 'qc' }, `queue = 'qc'`, []],
      ['step', { step: 'finish' }, `step = 'finish'`, []],
      ['correlation key', { correlationKey: 'cust-4' }, `correlation_key = 'cust-4'`, []],
      [
        'key prefix (no LIKE wildcards)',
        { correlationKeyPrefix: 'order:%_' },
        `left(correlation_key, 8) = 'order:%_'`,
        [],
      ],
      ['key prefix', { correlationKeyPrefix: 'cust-1' }, `correlation_key LIKE 'cust-1%'`, []],
      ['parent (gen_durable_parent)', {}, `parent_id = $1`, ['parent']],
      [
        'created range',
        { createdBefore: new Date(Date.now() - 86_400_000) },
        `inserted_at < now() - interval '1 day'`,
        [],
      ],
      [
        'updated range',
        {
          updatedAfter: new Date(Date.now() - 3 * 3_600_000),
          updatedBefore: new Date(Date.now() - 3_600_000),
        },
        `updated_at >= now() - interval '3 hours' AND updated_at < now() - interval '1 hour'`,
        [],
      ],
      ['error text', { errorContains: 'declined #1' }, `strpos(last_error, 'declined #1') > 0`, []],
      [
        'several fields',
        { fsm: 'beta', status: ['runnable', 'executing'], queue: 'qb' },
        `fsm = 'beta' AND status IN ('runnable', 'executing') AND queue = 'qb'`,
        [],
      ],
    ];

    it.each(cases)(
      'filters by %s, with pages and counts that agree with SQL',
      async (_l, f, where, p) => {
        const filter = p[0] === 'parent' ? { ...f, parentId: parent } : f;
        const params = p[0] === 'parent' ? [parent] : p;
        const expected = await truth(db, where, params);
        expect(expected.length).toBeGreaterThan(0);
        expect((await listAll(h, filter, { limit: 4 })).ids).toEqual(expected);
        // A scan bound below the table size: short pages with a next cursor, same rows.
        expect((await listAll(h, filter, { limit: 3, scanLimit: 9 })).ids).toEqual(expected);
        expect(await h.engine.count(filter)).toEqual({
          count: expected.length,
          capped: false,
          exact: true,
        });
      },
    );

    it('a page cut short by the scan bound still has a next cursor; the last page has none', async () => {
      const sparse = await h.engine.list({ errorContains: 'declined' }, { limit: 5, scanLimit: 5 });
      expect(sparse.items.length).toBeLessThan(5);
      expect(sparse.next).toBeDefined();
      const all = await h.engine.list({}, { limit: 1000 });
      expect(all.items).toHaveLength(100);
      expect(all.next).toBeUndefined();
      expect(await h.engine.list({ fsm: 'nobody' })).toEqual({ items: [] });
    });

    it('keyset pages stay stable while rows are inserted between and during pages', async () => {
      const expected = await truth(db, `fsm = 'alpha'`);
      const seen: string[] = [];
      let after: string | undefined;
      let inserted = 0;
      for (;;) {
        const [res] = await Promise.all([
          h.engine.list({ fsm: 'alpha' }, { limit: 6, ...(after ? { after } : {}) }),
          h.engine.insertAll(AlphaFsm, [{}, {}]).then(() => (inserted += 2)),
        ]);
        seen.push(...res.items.map((i) => i.id));
        if (!res.next) break;
        after = res.next;
      }
      expect(inserted).toBeGreaterThan(0);
      // Every row that existed when paging began, each once; rows inserted later have higher
      // ids than the first page's cursor and never shift a later page.
      const old = seen.filter((id) => expected.includes(id));
      expect(old).toEqual(expected);
      expect(new Set(seen).size).toBe(seen.length);
      await db.pool.query(
        `DELETE FROM gen_durable WHERE fsm = 'alpha' AND NOT (id = ANY ($1::bigint[]))`,
        [expected],
      );
    });
  });

  describe('count', () => {
    it('stops at the cap and says so', async () => {
      expect(await h.engine.count({}, { cap: 30 })).toEqual({
        count: 30,
        capped: true,
        exact: true,
      });
      // As many matches as the cap counts as capped: more might follow.
      expect(await h.engine.count({}, { cap: 100 })).toEqual({
        count: 100,
        capped: true,
        exact: true,
      });
      expect(await h.engine.count({ fsm: 'alpha' }, { cap: 101 })).toEqual({
        count: 60,
        capped: false,
        exact: true,
      });
      const failed = (await truth(db, `status = 'failed'`)).length;
      expect(await h.engine.count({ status: 'failed' }, { cap: failed })).toEqual({
        count: failed,
        capped: true,
        exact: true,
      });
      expect(await h.engine.count({ status: 'failed' }, { cap: failed + 1 })).toEqual({
        count: failed,
        capped: false,
        exact: true,
      });
    });

    it('the cap bounds the matches, not the rows examined: a sparse filter counts up to the cap', async () => {
      // 30 rows of an FSM among 300 others, inserted after them: the first rows in table
      // order do not match, and a cap of 10 still finds 10 matches.
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status) SELECT 'crowd', 'start', 'done' FROM generate_series(1, 300)`,
      );
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status) SELECT 'rare', 'start', 'done' FROM generate_series(1, 30)`,
      );
      expect(await h.engine.count({ fsm: 'rare' }, { cap: 10 })).toEqual({
        count: 10,
        capped: true,
        exact: true,
      });
      expect(await h.engine.count({ fsm: 'rare' }, { cap: 50 })).toEqual({
        count: 30,
        capped: false,
        exact: true,
      });
      expect(await h.engine.count({ fsm: 'rare', status: 'done' }, { cap: 30 })).toEqual({
        count: 30,
        capped: true,
        exact: true,
      });
      expect(await h.engine.count({ fsm: 'rare', status: 'failed' })).toEqual({
        count: 0,
        capped: false,
        exact: true,
      });
      await db.pool.query(`DELETE FROM gen_durable WHERE fsm IN ('crowd', 'rare')`);
    });

    it('answers runnable per queue and executing from their indexes', async () => {
      for (const [filter, where] of [
        [{ status: 'runnable', queue: 'qc' }, `status = 'runnable' AND queue = 'qc'`],
        [{ status: 'runnable' }, `status = 'runnable'`],
        [{ status: 'executing' }, `status = 'executing'`],
        [{ status: 'executing', fsm: 'alpha' }, `status = 'executing' AND fsm = 'alpha'`],
      ] as const) {
        expect(await h.engine.count(filter)).toEqual({
          count: (await truth(db, where)).length,
          capped: false,
          exact: true,
        });
      }
    });
  });

  describe('plans: each driver uses its index, also as a generic plan', () => {
    let client: PoolClient;
    beforeAll(async () => {
      // Enough rows for the planner to prefer indexes: 20 000 done rows, 300 failed, 40
      // children of one parent.
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status, queue)
         SELECT 'bulk', 'start', 'done', 'bulk' FROM generate_series(1, 20000)`,
      );
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status, queue, last_error)
         SELECT 'bulk', 'start', 'failed', 'bulk', 'boom' FROM generate_series(1, 300)`,
      );
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, queue, parent_id)
         SELECT 'bulk', 'start', 'kids', $1 FROM generate_series(1, 40)`,
        [parent],
      );
      await db.pool.query('ANALYZE gen_durable');
      client = await db.pool.connect();
      await client.query('SET plan_cache_mode = force_generic_plan');
    });
    afterAll(async () => {
      client.release();
    });

    /** Index names of plan nodes that ran (Actual Loops > 0), and seq scans that ran. */
    async function indexesUsed(statement: Statement, params: unknown[]): Promise<string[]> {
      return (await explainRan(client, statement, params)).used;
    }

    /** The list statement as `list(filter)` runs it (its driver chosen by listDriver). */
    const list = (input: InstanceFilter) => {
      const filter = resolveInstanceFilter(input, 'f');
      const page = { driver: listDriver(filter), after: null, scan: 1000, limit: 50, filter };
      return indexesUsed(LIST_INSTANCES, LIST_INSTANCES.params(page));
    };
    const count = (input: InstanceFilter) => {
      const filter = resolveInstanceFilter(input, 'f');
      const request = { driver: countDriver(filter), cap: 10_000, budgetMs: 60_000, filter };
      return indexesUsed(COUNT_INSTANCES, COUNT_INSTANCES.params(request));
    };

    it.each([
      ['list, no filter', () => list({}), 'gen_durable_pkey'],
      ['list, failed', () => list({ status: 'failed' }), 'gen_durable_failed'],
      ['list, children', () => list({ parentId: parent }), 'gen_durable_parent'],
      ['count, failed', () => count({ status: 'failed' }), 'gen_durable_failed'],
      ['count, children', () => count({ parentId: parent }), 'gen_durable_parent'],
      [
        'count, runnable of a queue',
        () => count({ status: 'runnable', queue: 'kids' }),
        'gen_durable_pick',
      ],
      ['count, executing', () => count({ status: 'executing' }), 'gen_durable_lease'],
      [
        'count, failed of one FSM',
        () => count({ fsm: 'bulk', status: 'failed' }),
        'gen_durable_failed',
      ],
      [
        'count, runnable of one FSM',
        () => count({ fsm: 'bulk', status: 'runnable' }),
        'gen_durable_pick',
      ],
    ])('%s', async (_label, run, index) => {
      const used = await run();
      expect(used).toContain(index);
      expect(used.filter((u) => u.startsWith('seq:gen_durable'))).toEqual([]);
    });
  });

  describe('count: a time budget', () => {
    beforeAll(async () => {
      // 200 000 rows none of which matches: a sequential scan of them takes far more than 1 ms.
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status, queue)
         SELECT 'mass', 'start', 'done', 'mass' FROM generate_series(1, 200000)`,
      );
      await db.pool.query('ANALYZE gen_durable');
    });

    it('a count that cannot finish within its budget says exact: false, with the matches it found', async () => {
      const started = Date.now();
      expect(await h.engine.count({ fsm: 'nobody' }, { budgetMs: 1 })).toEqual({
        count: 0,
        capped: false,
        exact: false,
      });
      // Past the budget the scan stops within `cap` more rows: well under the whole table.
      expect(Date.now() - started).toBeLessThan(10_000);
      // A lower bound: the matches seen before the budget ran out are counted.
      const some = await h.engine.count({ fsm: ['alpha', 'beta'] }, { budgetMs: 1 });
      expect(some.exact).toBe(false);
      expect(some.capped).toBe(false);
      expect(some.count).toBeLessThanOrEqual(100);
      // With time enough, the same counts finish.
      expect(await h.engine.count({ fsm: 'nobody' }, { budgetMs: 60_000 })).toEqual({
        count: 0,
        capped: false,
        exact: true,
      });
      expect(await h.engine.count({ fsm: 'mass' }, { cap: 1_000_000, budgetMs: 60_000 })).toEqual({
        count: 200_000,
        capped: false,
        exact: true,
      });
    });
  });

  describe('bad input: a typed error naming the problem', () => {
    it.each([
      [
        'an unknown status',
        () => h.engine.list({ status: 'finished' as DurableStatus }),
        'list.filter.status',
      ],
      [
        'an unknown status among several',
        () => h.engine.count({ status: ['done', 'nope'] as unknown as DurableStatus[] }),
        'count.filter.status',
      ],
      [
        'an unknown filter key',
        () => h.engine.list({ fsmName: 'x' } as InstanceFilter),
        'list.filter',
      ],
      ['an empty fsm', () => h.engine.list({ fsm: '' }), 'list.filter.fsm'],
      ['an empty fsm list', () => h.engine.list({ fsm: [] }), 'list.filter.fsm'],
      ['a bad parent id', () => h.engine.list({ parentId: '0' }), 'list.filter.parentId'],
      [
        'an invalid date',
        () => h.engine.count({ createdAfter: new Date('x') }),
        'count.filter.createdAfter',
      ],
      ['a count cap of 0', () => h.engine.count({}, { cap: 0 }), 'count.options.cap'],
      ['a negative count cap', () => h.engine.count({}, { cap: -5 }), 'count.options.cap'],
      ['a fractional count cap', () => h.engine.count({}, { cap: 1.5 }), 'count.options.cap'],
      ['a count budget of 0', () => h.engine.count({}, { budgetMs: 0 }), 'count.options.budgetMs'],
      [
        'a count budget over a minute',
        () => h.engine.count({}, { budgetMs: 60_001 }),
        'count.options.budgetMs',
      ],
      ['a page limit of 0', () => h.engine.list({}, { limit: 0 }), 'list.page.limit'],
      ['a page limit over 1 000', () => h.engine.list({}, { limit: 1001 }), 'list.page.limit'],
      [
        'a scan limit below the limit',
        () => h.engine.list({}, { limit: 10, scanLimit: 5 }),
        'list.page.scanLimit',
      ],
      ['a malformed cursor', () => h.engine.list({}, { after: 'not-a-cursor' }), 'list.page.after'],
      [
        'a forged cursor',
        () => h.engine.list({}, { after: Buffer.from('gd1:abc:xyz').toString('base64url') }),
        'list.page.after',
      ],
      [
        'a cursor that is not a string',
        () => h.engine.list({}, { after: 5 as unknown as string }),
        'list.page.after',
      ],
    ])('%s', async (_label, call, path) => {
      await rejects(call, path);
    });

    it('a cursor made for another filter is refused', async () => {
      const page = await h.engine.list({ fsm: 'alpha' }, { limit: 2 });
      expect(page.next).toBeDefined();
      const err = await rejects(
        () => h.engine.list({ fsm: 'beta' }, { limit: 2, after: page.next! }),
        'list.page.after',
      );
      expect(err.message).toContain('another filter');
      // The same cursor with its own filter goes on.
      await expect(
        h.engine.list({ fsm: 'alpha' }, { limit: 2, after: page.next! }),
      ).resolves.toMatchObject({ items: expect.any(Array) });
    });
  });
});
