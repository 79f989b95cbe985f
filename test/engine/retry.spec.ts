import {
  done,
  DuplicateError,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
  UnknownStepError,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Manual retry (docs/design.md §27.3): a failed or cancelled row runs again, its parent's
// barrier counted again; every bad input is a typed error and changes nothing.

type FlakyState = { fixed?: boolean; tag?: string };

@DurableFsm({ name: 'flaky' })
class FlakyFsm {
  @Step() start(ctx: StepContext<FlakyState>) {
    if (!ctx.state.fixed) return stop('broken');
    return done({ fixed: true, tag: ctx.state.tag ?? null });
  }
  @Step() repaired(ctx: StepContext<FlakyState>) {
    return done({ repaired: true, tag: ctx.state.tag ?? null });
  }
}

@DurableFsm({ name: 'flaky-parent' })
class FlakyParentFsm {
  @Step() start() {
    return scheduleChildren(
      'joined',
      [{ fsm: FlakyFsm }, { fsm: FlakyFsm, state: { fixed: true } }],
      {},
    );
  }
  @Step() joined(ctx: StepContext) {
    return done({ children: ctx.children.map((c) => c.status) });
  }
}

describe('retry (docs/design.md §27.3)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [FlakyFsm, FlakyParentFsm], {
      queues: {},
      reaper: false,
      gc: false,
      poke: 'none',
    });
    gd = GenDurableTesting.forEngine(h.engine);
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });
  beforeEach(() => gd.reset());

  it('runs a failed row again with a state function, attempt and reaps reset', async () => {
    const id = await h.engine.insert(FlakyFsm, { state: { tag: 'a' } });
    await gd.drain();
    await gd.assertFailed(id, 'broken');
    await db.pool.query(`UPDATE gen_durable SET attempt = 3, reaps = 2 WHERE id = $1`, [id]);
    await h.engine.retry<FlakyState>(id, { state: (s) => ({ ...s, fixed: true }) });
    expect(await rowOf(db, id)).toMatchObject({
      status: 'runnable',
      attempt: 0,
      reaps: 0,
      last_error: 'broken',
    });
    expect(h.eventsOf('instance:retried', id)).toHaveLength(1);
    await gd.drain();
    await gd.assertDone(id, { fixed: true, tag: 'a' });
  });

  it('runs a cancelled row again at another step, its cancel cleared', async () => {
    const id = await h.engine.insert(FlakyFsm, { state: { tag: 'b' } });
    await h.engine.cancel(id, { reason: 'oops' });
    await h.engine.retry(id, { step: 'repaired' });
    expect(await rowOf(db, id)).toMatchObject({
      status: 'runnable',
      step: 'repaired',
      cancel_requested_at: null,
      cancel_reason: null,
    });
    await gd.drain();
    await gd.assertDone(id, { repaired: true, tag: 'b' });
  });

  it('schedules it at `at`', async () => {
    const id = await h.engine.insert(FlakyFsm, { state: { fixed: false } });
    await h.engine.cancel(id);
    const at = new Date(Date.now() + 3_600_000);
    await h.engine.retry(id, { at, state: { fixed: true } });
    const view = await h.engine.get(id);
    expect(view?.status).toBe('runnable');
    expect(Math.abs((view?.eligibleAt.getTime() ?? 0) - at.getTime())).toBeLessThan(1000);
    expect(await gd.drain({ withScheduled: false })).toMatchObject({ steps: 0 });
  });

  it('refuses bad input with typed errors and changes nothing', async () => {
    await expect(h.engine.retry('987654321')).rejects.toThrow(NoTargetError);
    const live = await h.engine.insert(FlakyFsm, {});
    await expect(h.engine.retry(live)).rejects.toThrow(/is runnable: only a failed or cancelled/);
    const ok = await h.engine.insert(FlakyFsm, { state: { fixed: true } });
    await gd.drain();
    await gd.assertDone(ok);
    await expect(h.engine.retry(ok)).rejects.toThrow(/is done: only a failed or cancelled/);

    const failed = await h.engine.insert(FlakyFsm, {});
    await gd.drain();
    const before = await rowOf(db, failed);
    await expect(h.engine.retry(failed, { step: 'nope' })).rejects.toThrow(UnknownStepError);
    await expect(
      h.engine.retry(failed, {
        state: () => {
          throw new Error('no state for you');
        },
      }),
    ).rejects.toThrow(/retry.state: the state function threw: no state for you/);
    await expect(h.engine.retry(failed, { state: [1, 2] as never })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.retry(failed, { at: new Date('x') })).rejects.toThrow(InvalidInputError);
    await expect(h.engine.retry(failed, { at: new Date(8.64e15) })).rejects.toThrow(
      /retry\.at: must be a valid Date in years 1/,
    );
    await expect(h.engine.retry(failed, { detach: 'yes' as never })).rejects.toThrow(
      InvalidInputError,
    );
    await expect(h.engine.retry(failed, { force: true } as never)).rejects.toThrow(
      InvalidInputError,
    );
    expect(await rowOf(db, failed)).toEqual(before);
  });

  it('a re-occupied correlation key is a DuplicateError', async () => {
    const id = await h.engine.insert(FlakyFsm, { correlationKey: 'flaky:1' });
    await gd.drain();
    await gd.assertFailed(id);
    const other = await h.engine.insert(FlakyFsm, { correlationKey: 'flaky:1' });
    await expect(h.engine.retry(id)).rejects.toThrow(DuplicateError);
    expect((await rowOf(db, id))['status']).toBe('failed');
    await h.engine.cancel(other);
    await h.engine.retry(id, { state: { fixed: true } });
    expect((await h.engine.get({ correlationKey: 'flaky:1' }))?.id).toBe(id);
  });

  it('a child retried while its parent awaits is counted again; the join waits for it', async () => {
    const parent = await h.engine.insert(FlakyParentFsm, {});
    // One drain runs the fan-out and both children: the broken one fails, the parent joins.
    // Hold the parent instead: fail the children one by one.
    await gd.drain({ maxSteps: 1 }).catch(() => undefined);
    await gd.assertStatus(parent, 'awaiting_children');
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE parent_id = $1 ORDER BY id`,
      [parent],
    );
    const [broken, fine] = rows.map((r) => r.id);
    await h.engine.cancel(fine!, { children: 'keep' });
    expect((await rowOf(db, parent))['children_pending']).toBe(1);
    await h.engine.retry(fine!);
    expect(await rowOf(db, parent)).toMatchObject({
      status: 'awaiting_children',
      children_pending: 2,
    });
    await gd.drain();
    // The broken child failed (pending 1 → the fine one done → 0): the parent joined both.
    await gd.assertFailed(broken!);
    await gd.assertDone(parent, { children: ['failed', 'done'] });
  });

  it('a child whose parent moved on is refused unless detach', async () => {
    const parent = await h.engine.insert(FlakyParentFsm, {});
    await gd.drain();
    await gd.assertDone(parent);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM gen_durable WHERE parent_id = $1 AND status = 'failed'`,
      [parent],
    );
    const child = rows[0]!.id;
    const before = await rowOf(db, child);
    await expect(h.engine.retry(child)).rejects.toThrow(
      /parent .* is done and no longer awaits its children: pass detach: true/,
    );
    expect(await rowOf(db, child)).toEqual(before);
    await h.engine.retry(child, { detach: true, state: { fixed: true } });
    expect(await rowOf(db, child)).toMatchObject({ status: 'runnable', parent_id: null });
    await gd.drain();
    await gd.assertDone(child);
    await gd.assertDone(parent);
  });
});
