import {
  done,
  DurableFsm,
  next,
  Step,
  type StepContext,
  StepCancelledError,
  stepAbortReason,
} from '../../lib';
import { bootEngine, eventually, type Harness, rowOf } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// A cooperative cancel aborts the running step's ctx.signal (docs/design.md §27.2, §27.5): the
// owner's heartbeat carries the request back; the step sees a StepCancelledError with the
// reason, and whatever it returns or throws commits as cancelled.

const seen = new Map<string, unknown>();

/** Resolves when `signal` aborts; never otherwise. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(), { once: true }),
  );
}

@DurableFsm({ name: 'listener', queue: 'abortable' })
class ListenerFsm {
  @Step() async start(ctx: StepContext<{ mode: 'return' | 'throw' }>) {
    await aborted(ctx.signal);
    seen.set(ctx.id, stepAbortReason(ctx.signal));
    if (ctx.state.mode === 'throw') throw ctx.signal.reason;
    return next('after', ctx.state);
  }
  @Step() after() {
    return done({});
  }
}

describe('cancel aborts the running step (docs/design.md §27.2, §27.5)', () => {
  let db: TestDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ListenerFsm], { queues: { abortable: 2 } });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  it.each(['return', 'throw'] as const)(
    'a step that %ss once its signal aborts ends cancelled, the reason in ctx.signal.reason',
    async (mode) => {
      const id = await h.engine.insert(ListenerFsm, { state: { mode } });
      await eventually(async () => (await rowOf(db, id))['status'] === 'executing');
      expect((await h.engine.cancel(id, { reason: `stop ${mode}` })).requested).toEqual([id]);
      // Learnt at the owner's next heartbeat (500 ms here).
      const answer = await h.engine.await(id, { until: 'terminal', timeout: 10_000 });
      expect(answer).toEqual({ kind: 'cancelled', reason: `stop ${mode}` });
      const reason = seen.get(id);
      expect(reason).toBeInstanceOf(StepCancelledError);
      expect(reason).toMatchObject({ abortCause: 'cancelled', reason: `stop ${mode}`, id });
      expect(h.eventsOf('step:abort', id).map((e) => e.metadata['cause'])).toEqual(['cancelled']);
      expect(await rowOf(db, id)).toMatchObject({
        status: 'cancelled',
        step: 'start',
        last_error: null,
      });
    },
  );
});
