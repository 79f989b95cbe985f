import {
  done,
  DurableFsm,
  InvalidInputError,
  next,
  retry,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, eventually, Gates, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Progress (docs/design.md §28.2): ctx.progress keeps the latest value, the next heartbeat
// stores it (no statement of its own), get() answers it, step:progress is emitted, and a
// later run of the same step sees it as ctx.lastProgress.

const gates = new Gates();
const seen: { id: string; step: string; attempt: number; last: unknown }[] = [];
const refused: unknown[] = [];

type S = { tag: string; fail?: boolean; hard?: boolean };

@DurableFsm({ name: 'progress-job' })
class ProgressFsm {
  @Step() async start(ctx: StepContext<S>) {
    seen.push({ id: ctx.id, step: ctx.step, attempt: ctx.attempt, last: ctx.lastProgress });
    const from = (ctx.lastProgress as { rows?: number } | undefined)?.rows ?? 0;
    ctx.progress({ rows: from + 10 });
    ctx.progress({ rows: from + 20 }); // only the latest is kept
    for (const bad of [() => 1, 10n, { x: undefined as unknown as number, y: NaN }]) {
      try {
        ctx.progress(bad);
      } catch (err) {
        refused.push(err);
      }
    }
    await gates.wait(`${ctx.state.tag}:${ctx.attempt}`);
    if (ctx.state.fail && ctx.attempt === 0) throw new Error('disk full');
    return next('verify', ctx.state);
  }
  @Step() verify(ctx: StepContext<S>) {
    seen.push({ id: ctx.id, step: ctx.step, attempt: ctx.attempt, last: ctx.lastProgress });
    return done({ ok: true });
  }
  onError(_err: unknown, ctx: StepContext<S>) {
    return ctx.attempt === 0 && !ctx.state.hard ? retry(ctx.state, 0) : stop('gave up');
  }
}

/** Reports progress once its first gate opens, then waits on a second one. */
@DurableFsm({ name: 'progress-soon', queue: 'soon' })
class SoonFsm {
  @Step() async start(ctx: StepContext<{ tag: string }>) {
    await gates.wait(`soon:${ctx.state.tag}`);
    ctx.progress({ tag: ctx.state.tag });
    await gates.wait(`soon-end:${ctx.state.tag}`);
    return done({});
  }
}

describe('progress (docs/design.md §28.2)', () => {
  let db: TestDatabase;

  afterAll(async () => {
    await db?.drop();
  });

  describe('with the testing helpers (drain, heartbeat)', () => {
    let h: Harness;
    let gd: GenDurableTesting;
    beforeAll(async () => {
      db = await createTestDatabase();
      h = await bootEngine(db, [ProgressFsm], {
        queues: {},
        reaper: false,
        gc: false,
        poke: 'none',
      });
      gd = GenDurableTesting.forEngine(h.engine);
    });
    afterAll(async () => {
      await h?.close();
    });

    it('the heartbeat stores the latest value in its one statement; get() answers it', async () => {
      const id = await h.engine.insert(ProgressFsm, { state: { tag: 'a' } });
      const draining = gd.drain();
      await gates.reached('a:0');
      // Bad values are refused at the call, naming ctx.progress.
      expect(refused).toHaveLength(3);
      for (const err of refused) {
        expect(err).toBeInstanceOf(InvalidInputError);
        expect((err as InvalidInputError).path).toMatch(/^ctx\.progress/);
      }
      expect((await h.engine.get(id))?.progress).toBeNull();
      h.clear();
      expect(await gd.heartbeat()).toBe(1);
      expect(h.statements).toEqual(['heartbeat']);
      expect(h.eventsOf('step:progress', id)).toHaveLength(1);
      const view = await h.engine.get(id);
      expect(view?.progress).toEqual({ rows: 20 });
      expect(view?.progressAt).toBeInstanceOf(Date);
      // Nothing pending any more: the next heartbeat stores nothing and emits nothing.
      h.clear();
      expect(await gd.heartbeat()).toBe(0);
      expect(h.statements).toEqual(['heartbeat']);
      expect(h.eventsOf('step:progress')).toHaveLength(0);
      gates.open('a:0');
      await draining;
      // The next step did not report: it sees no lastProgress; get() still answers the last value.
      expect(seen.filter((s) => s.id === id)).toEqual([
        { id, step: 'start', attempt: 0, last: undefined },
        { id, step: 'verify', attempt: 0, last: undefined },
      ]);
      expect(await h.engine.get(id)).toMatchObject({ status: 'done', progress: { rows: 20 } });
    });

    it('a step that threw and is retried sees its stored value as ctx.lastProgress', async () => {
      const id = await h.engine.insert(ProgressFsm, { state: { tag: 'b', fail: true } });
      const draining = gd.drain();
      await gates.reached('b:0');
      expect(await gd.heartbeat()).toBe(1);
      gates.open('b:0');
      await gates.reached('b:1');
      expect(seen.filter((s) => s.id === id && s.step === 'start')).toEqual([
        { id, step: 'start', attempt: 0, last: undefined },
        { id, step: 'start', attempt: 1, last: { rows: 20 } },
      ]);
      // The retried run reports from where it was.
      expect(await gd.heartbeat()).toBe(1);
      expect((await h.engine.get(id))?.progress).toEqual({ rows: 40 });
      gates.open('b:1');
      await draining;
      await gd.assertDone(id);
    });

    it('a manual retry of a failed row sees the last stored value too', async () => {
      const id = await h.engine.insert(ProgressFsm, {
        state: { tag: 'c', fail: true, hard: true },
      });
      const draining = gd.drain();
      await gates.reached('c:0');
      await gd.heartbeat();
      gates.open('c:0');
      await draining;
      await gd.assertFailed(id, 'gave up');
      await h.engine.retry<S>(id, { state: (st) => ({ ...st, tag: 'c2' }) });
      const again = gd.drain();
      await gates.reached('c2:0');
      expect(seen.filter((s) => s.id === id && s.step === 'start').pop()).toEqual({
        id,
        step: 'start',
        attempt: 0,
        last: { rows: 20 },
      });
      gates.open('c2:0');
      await again;
    });
  });

  describe('with a running scheduler', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await bootEngine(db, [ProgressFsm], { reaper: false, gc: false });
    });
    afterAll(async () => {
      gates.openAll();
      await h?.close();
    });

    it("the scheduler's heartbeat carries the pending value", async () => {
      const id = await h.engine.insert(ProgressFsm, { state: { tag: 'd' } });
      await gates.reached('d:0');
      await eventually(async () => (await h.engine.get(id))?.progress !== null);
      expect((await h.engine.get(id))?.progress).toEqual({ rows: 20 });
      await h.waitFor('step:progress', (e) => e.metadata['id'] === id);
      // No statement but the heartbeat wrote it: nothing progress-specific ran.
      expect(h.statements.filter((s) => s.includes('progress'))).toEqual([]);
      gates.open('d:0');
      await eventually(async () => (await h.engine.get(id))?.status === 'done');
    });
  });
  describe('stored within a second, whatever the heartbeat', () => {
    let h: Harness;
    beforeAll(async () => {
      db ??= await createTestDatabase();
      // A heartbeat every 30 s: only the early progress write explains a stored value now.
      h = await bootEngine(db, [SoonFsm], {
        queues: { soon: 2 },
        heartbeatInterval: 30_000,
        leaseTtl: 120_000,
        reaper: false,
        gc: false,
      });
    });
    afterAll(async () => {
      gates.openAll();
      await h?.close();
    });

    it('values reported together by two steps go in one early heartbeat, while the steps still run', async () => {
      const [x, y] = await h.engine.insertAll(SoonFsm, [
        { state: { tag: 'x' } },
        { state: { tag: 'y' } },
      ]);
      await gates.reached('soon:x');
      await gates.reached('soon:y');
      h.clear();
      gates.open('soon:x');
      gates.open('soon:y');
      await eventually(async () => {
        const [a, b] = [await h.engine.get(x!), await h.engine.get(y!)];
        return a?.progress !== null && b?.progress !== null;
      }, 10_000);
      expect(await h.engine.get(x!)).toMatchObject({ status: 'executing', progress: { tag: 'x' } });
      expect(await h.engine.get(y!)).toMatchObject({ status: 'executing', progress: { tag: 'y' } });
      // Coalesced: one statement stored both (and renewed both leases).
      expect(h.statements.filter((name) => name === 'heartbeat')).toEqual(['heartbeat']);
      expect(
        h
          .eventsOf('step:progress')
          .map((e) => e.metadata['id'])
          .sort(),
      ).toEqual([x, y].sort());
      gates.open('soon-end:x');
      gates.open('soon-end:y');
      for (const id of [x!, y!]) {
        expect(await h.engine.await(id, { until: 'terminal' })).toEqual({
          kind: 'done',
          result: {},
        });
      }
    });
  });
});
