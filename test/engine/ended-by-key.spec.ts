import type { PoolClient } from 'pg';

import {
  awaitSignal,
  done,
  DurableFsm,
  NoTargetError,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GET_INSTANCE_BY_KEY } from '../../lib/sql/instance.sql';
import { EXPLAIN_INSTANCE } from '../../lib/sql/explain.sql';
import { READ_HISTORY_BY_KEY } from '../../lib/sql/history.sql';
import { renderStatement, type Statement } from '../../lib/sql/statement';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Reads by correlation key (docs/identity.md "Finding an instance by key"): the live occupant
// wins, else the most recent ended instance that carried the key — for get, history, explain,
// retry and fork alike. Signals still go to a live instance only.

/** Parks until `finish` (done) or `fail` (failed). */
@DurableFsm({ name: 'keyed', history: 'transitions' })
class KeyedFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal(['finish', 'fail'], 'end', ctx.state);
  }
  @Step() end(ctx: StepContext) {
    const last = ctx.awaited[ctx.awaited.length - 1];
    return last?.name === 'fail' ? stop('failed by signal') : done({ ok: true });
  }
}

describe('reads by correlation key find the ended instance (docs/identity.md)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [KeyedFsm], { gc: false });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  async function end(id: string, how: 'finish' | 'fail'): Promise<void> {
    await eventually(async () => (await t.engine.get({ id }))?.status === 'awaiting_signal');
    await t.engine.signal({ id }, how);
    await t.engine.await(id, { until: 'terminal' });
  }

  it('get, history and explain by key: the live occupant wins, else the most recent ended one', async () => {
    const key = 'order:123';
    const first = await t.engine.insert(KeyedFsm, { correlationKey: key });
    expect((await t.engine.get({ correlationKey: key }))?.id).toBe(first);
    await end(first, 'finish');

    // Ended, its key freed: still found by the key it carried.
    expect(await t.engine.get({ correlationKey: key })).toMatchObject({
      id: first,
      status: 'done',
    });
    const history = await t.engine.history({ correlationKey: key });
    expect(history.length).toBeGreaterThan(0);
    expect(history.every((e) => e.instanceId === first)).toBe(true);
    expect(await t.engine.explain({ correlationKey: key })).toMatchObject({
      id: first,
      status: 'done',
    });
    // A signal by key goes to a live instance only.
    await expect(t.engine.signal({ correlationKey: key }, 'finish')).rejects.toBeInstanceOf(
      NoTargetError,
    );

    // A new live instance with the key wins over the ended one.
    const second = await t.engine.insert(KeyedFsm, { correlationKey: key });
    expect((await t.engine.get({ correlationKey: key }))?.id).toBe(second);
    expect((await t.engine.explain({ correlationKey: key })).id).toBe(second);
    await end(second, 'fail');
    // Both ended: the one that ended last.
    expect(await t.engine.get({ correlationKey: key })).toMatchObject({
      id: second,
      status: 'failed',
    });
    expect((await t.engine.history({ correlationKey: key }))[0]?.instanceId).toBe(second);

    // Whichever ended last wins, not whichever was inserted last.
    await db.pool.query(
      `UPDATE gen_durable SET updated_at = now() + interval '1 minute' WHERE id = $1`,
      [first],
    );
    expect((await t.engine.get({ correlationKey: key }))?.id).toBe(first);
  });

  it('retry and fork by key act on the ended instance', async () => {
    const failed = await t.engine.insert(KeyedFsm, { correlationKey: 'retry:1' });
    await end(failed, 'fail');
    await t.engine.retry({ correlationKey: 'retry:1' });
    // Retried at its failed step, which ends it (nothing awaited this time): done.
    expect(await t.engine.await(failed, { until: 'terminal' })).toMatchObject({ kind: 'done' });
    expect((await t.engine.get({ correlationKey: 'retry:1' }))?.id).toBe(failed);

    const finished = await t.engine.insert(KeyedFsm, { correlationKey: 'fork:1' });
    await end(finished, 'finish');
    const fork = await t.engine.fork({ correlationKey: 'fork:1' });
    expect(fork).not.toBe(finished);
    expect((await t.engine.get({ id: fork }))?.forkedFrom).toBe(finished);
  });

  it('an empty scope stays a label; a key nobody carried finds nothing', async () => {
    const label = await t.engine.insert(KeyedFsm, {
      correlationKey: 'label:1',
      correlationScope: [],
    });
    await end(label, 'finish');
    expect(await t.engine.get({ correlationKey: 'label:1' })).toBeNull();
    expect(await t.engine.get({ correlationKey: 'nobody' })).toBeNull();
    await expect(t.engine.history({ correlationKey: 'nobody' })).rejects.toBeInstanceOf(
      NoTargetError,
    );
    await expect(t.engine.explain({ correlationKey: 'nobody' })).rejects.toBeInstanceOf(
      NoTargetError,
    );
  });

  describe('plans: the fallback reads gen_durable_ended_key (version 14), never the table', () => {
    let client: PoolClient;
    beforeAll(async () => {
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, status, correlation_key, correlation_scope, updated_at)
         SELECT 'keyed', 'end', 'done', 'bulk:' || i,
                '{runnable,executing,awaiting_signal,awaiting_children}', now() - interval '1 day'
           FROM generate_series(1, 20000) i`,
      );
      await db.pool.query(
        `INSERT INTO gen_durable (fsm, step, correlation_key, correlation_scope)
         SELECT 'keyed', 'start', 'live:' || i, '{runnable,executing,awaiting_signal,awaiting_children}'
           FROM generate_series(1, 20000) i`,
      );
      await db.pool.query('ANALYZE gen_durable');
      client = await db.pool.connect();
      await client.query('SET plan_cache_mode = force_generic_plan');
    });
    afterAll(() => client.release());

    async function used(statement: Statement, params: unknown[]): Promise<string[]> {
      const { rows } = await client.query<{ 'QUERY PLAN': unknown }>({
        text: `EXPLAIN (ANALYZE, FORMAT JSON) ${renderStatement(statement, 'public')}`,
        values: params,
      });
      const seen = new Set<string>();
      const walk = (node: Record<string, unknown>): void => {
        const loops = Number(node['Actual Loops'] ?? 0);
        if (typeof node['Index Name'] === 'string' && loops > 0) seen.add(node['Index Name']);
        if (node['Node Type'] === 'Seq Scan' && loops > 0) {
          seen.add(`seq:${String(node['Relation Name'])}`);
        }
        for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) {
          walk(child);
        }
      };
      walk((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
      return [...seen].sort();
    }

    it.each([
      ['a live key: the occupant only', 'live:7', ['gen_durable_correlation', 'gen_durable_pkey']],
      [
        'an ended key: then the newest ended rows',
        'bulk:19990',
        ['gen_durable_correlation', 'gen_durable_ended_key', 'gen_durable_pkey'],
      ],
      [
        'a key nobody carries',
        'nobody',
        ['gen_durable_correlation', 'gen_durable_ended_key', 'gen_durable_pkey'],
      ],
    ])('get by key, %s', async (_label, key, indexes) => {
      expect(
        await used(GET_INSTANCE_BY_KEY, GET_INSTANCE_BY_KEY.params({ correlationKey: key })),
      ).toEqual(indexes);
      expect(
        await used(
          READ_HISTORY_BY_KEY,
          READ_HISTORY_BY_KEY.params({ target: key, before: null, limit: 10 }),
        ),
      ).not.toContain('seq:gen_durable');
      const explain = EXPLAIN_INSTANCE.params({ id: null, correlationKey: key });
      expect(await used(EXPLAIN_INSTANCE, explain)).not.toContain('seq:gen_durable');
    });
  });
});
