import { DurableFsm, done, next, Step, type StepContext } from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

@DurableFsm({ name: 'counter' })
class CounterFsm {
  @Step() start(ctx: StepContext<{ n: number }>) {
    return next('inc', { n: ctx.state.n + 1 });
  }
  @Step() inc(ctx: StepContext<{ n: number }>) {
    return ctx.state.n >= 3 ? done({ total: ctx.state.n }) : next('inc', { n: ctx.state.n + 1 });
  }
}

@DurableFsm({ name: 'greeter' })
class GreeterJob {
  perform(args: { who: string }) {
    return { greeting: `hello ${args.who}` };
  }
}

describe('basic flow', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [CounterFsm, GreeterJob]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('runs an FSM to completion and await answers its result', async () => {
    const id = await t.engine.insert(CounterFsm, { state: { n: 0 } });
    expect(id).toMatch(/^\d+$/);
    const result = await t.engine.await(id, { timeout: 5000 });
    expect(result).toEqual({ kind: 'done', result: { total: 3 } });
    const view = await t.engine.get({ id });
    expect(view).toMatchObject({ status: 'done', step: 'inc', lockedBy: null, state: { n: 3 } });
  });

  it('runs a job by name', async () => {
    const id = await t.engine.insert('greeter', { args: { who: 'nest' } });
    expect(await t.engine.await(id)).toEqual({ kind: 'done', result: { greeting: 'hello nest' } });
  });

  it('insertAll inserts many in one statement and they all finish', async () => {
    t.clear();
    const ids = await t.engine.insertAll(
      CounterFsm,
      Array.from({ length: 50 }, (_, i) => ({ state: { n: i % 3 } })),
    );
    expect(t.statements.filter((s) => s === 'insert_unkeyed_instances')).toHaveLength(1);
    expect(ids).toHaveLength(50);
    const results = await Promise.all(ids.map((id) => t.engine.await(id, { timeout: 10_000 })));
    expect(results.every((r) => r.kind === 'done')).toBe(true);
  });
});
