import { Injectable } from '@nestjs/common';

import {
  ConfigurationError,
  done,
  DurableFsm,
  type DurableStepInterceptor,
  next,
  Step,
  type StepContext,
  stop,
  UseStepInterceptors,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// docs/interceptors.md: interceptors wrap every step, the module's first, then the FSM's.

/** Injected into every interceptor: proves they come from Nest's container. */
@Injectable()
class Journal {
  readonly lines: string[] = [];
}

/** Wraps a step with `<label>>step` and `<label><step` lines. */
@Injectable()
abstract class Logging implements DurableStepInterceptor {
  protected abstract readonly label: string;
  constructor(private readonly journal: Journal) {}

  async intercept(ctx: StepContext<unknown>, proceed: () => Promise<unknown>): Promise<unknown> {
    this.journal.lines.push(`${this.label}>${ctx.step}`);
    try {
      return await proceed();
    } finally {
      this.journal.lines.push(`${this.label}<${ctx.step}`);
    }
  }
}

@Injectable()
class FirstGlobal extends Logging {
  protected readonly label = 'g1';
}

@Injectable()
class SecondGlobal extends Logging {
  protected readonly label = 'g2';
}

/** FSM-level: throws or answers on its own when the state asks it to. */
@Injectable()
class Gate implements DurableStepInterceptor {
  constructor(private readonly journal: Journal) {}

  intercept(ctx: StepContext<unknown>, proceed: () => Promise<unknown>): Promise<unknown> {
    const mode = (ctx.state as { gate?: string }).gate;
    this.journal.lines.push(`gate>${ctx.step}`);
    if (mode === 'throw') throw new Error('refused by the gate');
    if (mode === 'reject') return Promise.reject(new Error('rejected by the gate'));
    if (mode === 'answer') return Promise.resolve(done({ answeredBy: 'gate' }));
    return proceed();
  }
}

const thrown: string[] = [];

@DurableFsm({ name: 'intercepted' })
@UseStepInterceptors(Gate)
class InterceptedFsm {
  constructor(private readonly journal: Journal) {}

  @Step() start(ctx: StepContext) {
    this.journal.lines.push(`step ${ctx.step}`);
    if (ctx.state['gate'] === 'step-throws') throw new Error('thrown by the step');
    return done({ ran: true });
  }

  onError(err: unknown) {
    thrown.push(err instanceof Error ? err.message : String(err));
    return stop(err);
  }
}

@DurableFsm({ name: 'intercepted-inline', inlineExecution: true, stepTimeout: 60_000 })
class InlineFsm {
  constructor(private readonly journal: Journal) {}

  @Step() start() {
    this.journal.lines.push('step start');
    return next('second', {});
  }

  @Step() second() {
    this.journal.lines.push('step second');
    return done({});
  }
}

@Injectable()
class NotProvided implements DurableStepInterceptor {
  intercept(_ctx: StepContext<unknown>, proceed: () => Promise<unknown>): Promise<unknown> {
    return proceed();
  }
}

describe('step interceptors (docs/interceptors.md)', () => {
  let db: TestDatabase;
  let t: Harness;
  let journal: Journal;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(
      db,
      [Journal, FirstGlobal, SecondGlobal, Gate, InterceptedFsm, InlineFsm],
      { stepInterceptors: [FirstGlobal, SecondGlobal] },
    );
    journal = t.app.get(Journal);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });
  beforeEach(() => {
    journal.lines.length = 0;
    thrown.length = 0;
  });

  it('wraps a step: module interceptors first, in order, then the FSM', async () => {
    const id = await t.engine.insert(InterceptedFsm);
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { ran: true },
    });
    expect(journal.lines).toEqual([
      'g1>start',
      'g2>start',
      'gate>start',
      'step start',
      'g2<start',
      'g1<start',
    ]);
  });

  it.each([
    ['throw', 'refused by the gate'],
    ['reject', 'rejected by the gate'],
    ['step-throws', 'thrown by the step'],
  ])('an interceptor that throws (%s) fails the step as a step throw does', async (gate, msg) => {
    const id = await t.engine.insert(InterceptedFsm, { state: { gate } });
    const settled = await t.engine.await(id, { until: 'terminal' });
    expect(settled).toEqual({ kind: 'failed', error: msg });
    expect(thrown).toEqual([msg]);
    // The outer interceptors saw the throw go through them.
    expect(journal.lines.slice(-2)).toEqual(['g2<start', 'g1<start']);
  });

  it("one that answers without calling next() gives the step's outcome; the step never runs", async () => {
    const id = await t.engine.insert(InterceptedFsm, { state: { gate: 'answer' } });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { answeredBy: 'gate' },
    });
    expect(journal.lines).not.toContain('step start');
  });

  it('wraps each step of an inline chain, and a step with a timeout', async () => {
    const id = await t.engine.insert(InlineFsm);
    expect(await t.engine.await(id, { until: 'terminal' })).toMatchObject({ kind: 'done' });
    // `second` ran on the held claim: an inline chain (docs/design.md §7).
    expect(t.events).toContainEqual(
      expect.objectContaining({
        event: 'run_ahead:continue',
        metadata: expect.objectContaining({ id, from: 'start', to: 'second' }) as unknown,
      }),
    );
    expect(journal.lines).toEqual([
      'g1>start',
      'g2>start',
      'step start',
      'g2<start',
      'g1<start',
      'g1>second',
      'g2>second',
      'step second',
      'g2<second',
      'g1<second',
    ]);
  });

  it('an interceptor class that is no provider fails boot, naming it', async () => {
    const other = await createTestDatabase();
    try {
      await expect(
        bootEngine(other, [Journal, InterceptedFsm, Gate], {
          name: 'interceptors-unprovided',
          stepInterceptors: [NotProvided],
        }),
      ).rejects.toThrow(ConfigurationError);
      await expect(
        bootEngine(other, [Journal, InterceptedFsm], { name: 'interceptors-unprovided' }),
      ).rejects.toThrow(/@UseStepInterceptors: Gate is not a provider/);
    } finally {
      await other.drop();
    }
  });
});
