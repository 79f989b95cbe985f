import {
  done,
  DurableFsm,
  type DurableStatus,
  InvalidInputError,
  scheduleChildren,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/design.md §11, §26.8: the guard `correlation_guard` is settled by ON CONFLICT only at insert. A
// scope a row can enter after its insert (one without `runnable`, or that leaves a live status
// out) makes a claim or a flush raise a unique violation on gen_durable_correlation instead:
// every pick of the queue then aborts and no row of that queue runs, keyed or not. So a scope
// is either empty (a label) or holds every live status (terminal statuses optional).

@DurableFsm({ name: 'scope-shape', queue: 'scope' })
class ScopeJobFsm {
  @Step() start() {
    return done({ ok: true });
  }
}

@DurableFsm({ name: 'scope-parent', queue: 'scope' })
class ScopeParentFsm {
  @Step() start(ctx: StepContext) {
    return scheduleChildren(
      'joined',
      [{ fsm: 'scope-shape', correlationKey: 'child', correlationScope: ['executing'] }],
      ctx.state,
    );
  }
  @Step() joined() {
    return done({});
  }
  onError(err: unknown) {
    return done({ refused: err instanceof InvalidInputError ? err.path : String(err) });
  }
}

const LIVE: DurableStatus[] = ['runnable', 'executing', 'awaiting_signal', 'awaiting_children'];

describe('correlation scope shape (docs/design.md §11, §26.8)', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [ScopeJobFsm, ScopeParentFsm], { queues: { scope: 4 } });
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  const count = async (): Promise<number> =>
    (
      await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM gen_durable WHERE fsm = 'scope-shape'`,
      )
    ).rows[0]!.n;

  const refused: DurableStatus[][] = [
    ['executing'],
    ['runnable'],
    ['done'],
    ['runnable', 'executing', 'done'],
    ['awaiting_signal', 'failed'],
  ];
  for (const scope of refused) {
    it(`refuses [${scope.join(', ')}] with InvalidInputError naming correlationScope; nothing written`, async () => {
      const before = await count();
      const attempt = t.engine.insert(ScopeJobFsm, {
        correlationKey: 'k',
        correlationScope: scope,
      });
      await expect(attempt).rejects.toBeInstanceOf(InvalidInputError);
      await expect(
        t.engine.insert(ScopeJobFsm, { correlationKey: 'k', correlationScope: scope }),
      ).rejects.toMatchObject({
        path: 'insert.correlationScope',
      });
      await expect(
        t.engine.insertAll(ScopeJobFsm, [{}, { correlationKey: 'k', correlationScope: scope }]),
      ).rejects.toMatchObject({
        path: 'insertAll[1].correlationScope',
      });
      expect(await count()).toBe(before);
    });
  }

  it('accepts the empty scope, the live statuses, and live plus terminal statuses; the rows run', async () => {
    const scopes: DurableStatus[][] = [
      [],
      LIVE,
      [...LIVE, 'done'],
      [...LIVE, 'failed'],
      [...LIVE, 'done', 'failed'],
      [...LIVE].reverse(),
    ];
    const ids = await Promise.all(
      scopes.map((scope, i) =>
        t.engine.insert(ScopeJobFsm, { correlationKey: `ok:${i}`, correlationScope: scope }),
      ),
    );
    for (const id of ids) {
      expect(await t.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
        kind: 'done',
        result: { ok: true },
      });
    }
  });

  it('a child spec with such a scope reaches onError; the parent and its queue keep running', async () => {
    const parent = await t.engine.insert(ScopeParentFsm);
    expect(await t.engine.await(parent, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { refused: 'scheduleChildren.children[0].correlationScope' },
    });
  });
});
