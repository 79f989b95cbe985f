import {
  ConfigurationError,
  done,
  DurableFsm,
  FsmNotRegisteredError,
  next,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §30: `@Step({ next })` declares the state graph's edges; `engine.graph(fsm)`
// answers it as JSON and Mermaid; a target that is not a step fails boot.

@DurableFsm({ name: 'graph-order', version: 2, stepTimeout: 5000 })
class OrderFsm {
  @Step({ next: ['pay', 'reject'] }) start() {
    return next('pay', {});
  }
  @Step('pay', { next: ['ship', 'pay', '$done'], timeout: 1000 }) charge() {
    return next('ship', {});
  }
  @Step({ next: ['$done'] }) ship() {
    return done({});
  }
  @Step() reject() {
    return done({});
  }
  @Step() audit() {
    return done({});
  }
}

@DurableFsm({ name: 'graph-job' })
class GraphJob {
  perform(_state: unknown, _ctx: StepContext<unknown>) {
    return done({});
  }
}

describe('engine.graph (docs/design.md §30)', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [OrderFsm, GraphJob], { queues: {}, reaper: false, gc: false });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it('answers the declared steps, edges and timeouts, by class or name', () => {
    const graph = h.engine.graph(OrderFsm);
    expect(h.engine.graph('graph-order')).toEqual(graph);
    expect(graph).toMatchObject({ fsm: 'graph-order', version: 2, kind: 'fsm', initial: 'start' });
    expect(graph.steps).toEqual([
      { name: 'start', next: ['pay', 'reject'], timeout: 5000 },
      { name: 'pay', next: ['ship', 'pay', '$done'], timeout: 1000 },
      { name: 'ship', next: ['$done'], timeout: 5000 },
      { name: 'reject', next: null, timeout: 5000 },
      { name: 'audit', next: null, timeout: 5000 },
    ]);
    expect(graph.edges).toEqual([
      { from: 'start', to: 'pay' },
      { from: 'start', to: 'reject' },
      { from: 'pay', to: 'ship' },
      { from: 'pay', to: 'pay' },
      { from: 'pay', to: '$done' },
      { from: 'ship', to: '$done' },
    ]);
    expect(graph.mermaid).toBe(
      [
        'stateDiagram-v2',
        '  [*] --> start',
        '  start --> pay',
        '  start --> reject',
        '  pay --> ship',
        '  pay --> pay',
        '  pay --> [*]',
        '  ship --> [*]',
        '',
      ].join('\n'),
    );
  });

  it('stepCounts: live rows per step, capped', async () => {
    await db.pool.query(
      `INSERT INTO gen_durable (fsm, fsm_version, step, status)
       VALUES ('graph-order', 2, 'pay', 'runnable'), ('graph-order', 2, 'pay', 'awaiting_signal'),
              ('graph-order', 2, 'pay', 'runnable'), ('graph-order', 2, 'ship', 'executing'),
              ('graph-order', 2, 'ship', 'done')`,
    );
    expect(await h.engine.stepCounts(OrderFsm)).toEqual({
      start: { count: 0, capped: false, exact: true },
      pay: { count: 3, capped: false, exact: true },
      ship: { count: 1, capped: false, exact: true },
      reject: { count: 0, capped: false, exact: true },
      audit: { count: 0, capped: false, exact: true },
    });
    expect((await h.engine.stepCounts('graph-order', { cap: 2 }))['pay']).toEqual({
      count: 2,
      capped: true,
      exact: true,
    });
  });

  it('a job is one step without edges', () => {
    expect(h.engine.graph(GraphJob)).toMatchObject({
      kind: 'job',
      initial: 'perform',
      steps: [{ name: 'perform', next: null }],
      edges: [],
    });
  });

  it('an unregistered FSM or version is FsmNotRegisteredError', () => {
    expect(() => h.engine.graph('nope')).toThrow(FsmNotRegisteredError);
    expect(() => h.engine.graph('graph-order', 1)).toThrow(FsmNotRegisteredError);
    expect(h.engine.graph('graph-order', 2).version).toBe(2);
  });

  it('a next target that is not a step fails boot naming the FSM, the step and the target', async () => {
    @DurableFsm({ name: 'graph-bad' })
    class BadGraph {
      @Step({ next: ['finish'] }) start() {
        return done({});
      }
    }
    const boot = bootEngine(db, [BadGraph], { name: 'bad', queues: {}, reaper: false, gc: false });
    await expect(boot).rejects.toBeInstanceOf(ConfigurationError);
    await expect(
      bootEngine(db, [BadGraph], { name: 'bad', queues: {}, reaper: false, gc: false }),
    ).rejects.toThrow(
      'invalid gen-durable configuration at fsm graph-bad.start.next: step "finish" does not exist',
    );
  });
});
