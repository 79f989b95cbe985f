import type { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  awaitSignal,
  ConfigurationError,
  done,
  DurableFsm,
  GenDurableModule,
  type HistoryEntry,
  type HistoryLevel,
  next,
  retry,
  scheduleChildren,
  sleep,
  Step,
  type StepContext,
} from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { bootEngine, FAST, type Harness } from '../support/engine-harness';
import { trackResource } from '../support/open-resources';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// Step history levels (docs/design.md §28.1): what each level records for a small FSM and a
// job, written by the statement (solo) or transaction that commits the outcome.

type Mode = 'happy' | 'retry' | 'throw' | 'await';
type S = { mode: Mode; n?: number };

@DurableFsm({ name: 'hist-child', history: 'off' })
class ChildFsm {
  @Step() start() {
    return done();
  }
}

function fsmOf(level: HistoryLevel) {
  @DurableFsm({ name: `hist-${level}`, history: level })
  class LevelFsm {
    @Step() start(ctx: StepContext<S>) {
      const s = ctx.state;
      if (s.mode === 'retry' && ctx.attempt === 0) return retry({ ...s, n: 1 });
      if (s.mode === 'throw') throw new TypeError('boom');
      if (s.mode === 'await') return awaitSignal('go', 'last', { ...s, n: 2 });
      return next('fan', { ...s, n: 1 });
    }
    @Step() fan(ctx: StepContext<S>) {
      return scheduleChildren('nap', [ChildFsm], { ...ctx.state, n: 2 });
    }
    @Step() nap(ctx: StepContext<S>) {
      return sleep('last', { ...ctx.state, n: 3 }, { for: 0 });
    }
    @Step() last() {
      return done({ ok: true });
    }
  }
  return LevelFsm;
}

function jobOf(level: HistoryLevel) {
  @DurableFsm({ name: `hist-job-${level}`, history: level, maxAttempts: 2 })
  class LevelJob {
    perform(): void {
      throw new RangeError('job boom');
    }
    backoff(): number {
      return 0;
    }
  }
  return LevelJob;
}

const LEVELS: HistoryLevel[] = ['off', 'failures', 'transitions', 'full'];
const fsms = new Map(LEVELS.map((l) => [l, fsmOf(l)]));
const jobs = new Map(LEVELS.map((l) => [l, jobOf(l)]));

describe('history levels (docs/design.md §28.1)', () => {
  let db: TestDatabase;
  let h: Harness;
  let gd: GenDurableTesting;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [ChildFsm, ...fsms.values(), ...jobs.values()], {
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

  /** Oldest first: `[kind, step, nextStep, outcome]`. */
  async function run(level: HistoryLevel, mode: Mode): Promise<HistoryEntry[]> {
    const id = await h.engine.insert(fsms.get(level)!, { state: { mode } });
    await gd.drain();
    if (mode === 'await') {
      await h.engine.signal(id, 'go');
      await gd.drain();
    }
    return (await h.engine.history(id)).reverse();
  }
  const shape = (rows: HistoryEntry[]) => rows.map((r) => [r.kind, r.step, r.nextStep, r.outcome]);

  const HAPPY = [
    ['next', 'start', 'fan', 'runnable'],
    ['scheduleChildren', 'fan', 'nap', 'awaiting_children'],
    ['sleep', 'nap', 'last', 'runnable'],
    ['done', 'last', null, 'done'],
  ];

  it("'off' records nothing, whatever happens", async () => {
    for (const mode of ['happy', 'retry', 'throw', 'await'] as Mode[]) {
      expect(await run('off', mode)).toEqual([]);
    }
    const job = await h.engine.insert(jobs.get('off')!);
    await gd.drain();
    expect(await h.engine.history(job)).toEqual([]);
  });

  it("'failures' records retries and thrown errors, not the happy path", async () => {
    expect(await run('failures', 'happy')).toEqual([]);
    expect(await run('failures', 'await')).toEqual([]);
    const retried = await run('failures', 'retry');
    expect(shape(retried)).toEqual([['retry', 'start', null, 'runnable']]);
    expect(retried[0]).toMatchObject({ attempt: 0, error: null, state: null, actor: null });
    expect(retried[0]!.worker).toMatch(/^inline-/);
    const thrown = await run('failures', 'throw');
    expect(shape(thrown)).toEqual([['stop', 'start', null, 'failed']]);
    expect(thrown[0]!.error).toMatchObject({ name: 'TypeError', message: 'boom' });
    expect(thrown[0]!.error!.stack).toMatch(/^\s+at /);
  });

  it("'failures' records a job's thrown retry and its final stop", async () => {
    const job = await h.engine.insert(jobs.get('failures')!);
    await gd.drain();
    const rows = (await h.engine.history(job)).reverse();
    expect(shape(rows)).toEqual([
      ['retry', 'perform', null, 'runnable'],
      ['stop', 'perform', null, 'failed'],
    ]);
    expect(rows.map((r) => r.attempt)).toEqual([0, 1]);
    for (const r of rows) {
      expect(r.error).toMatchObject({ name: 'RangeError', message: 'job boom' });
    }
  });

  it("'transitions' records every committed outcome, without state", async () => {
    const happy = await run('transitions', 'happy');
    expect(shape(happy)).toEqual(HAPPY);
    expect(happy.every((r) => r.state === null)).toBe(true);
    expect(shape(await run('transitions', 'await'))).toEqual([
      ['await', 'start', 'last', 'awaiting_signal'],
      ['done', 'last', null, 'done'],
    ]);
    expect(shape(await run('transitions', 'retry'))).toEqual([
      ['retry', 'start', null, 'runnable'],
      ['next', 'start', 'fan', 'runnable'],
      ...HAPPY.slice(1),
    ]);
  });

  it("'full' records the committed state too", async () => {
    const happy = await run('full', 'happy');
    expect(shape(happy)).toEqual(HAPPY);
    expect(happy.map((r) => (r.state as S).n)).toEqual([1, 2, 3, 3]);
    const parked = await run('full', 'await');
    expect(parked[0]!.state).toEqual({ mode: 'await', n: 2 });
  });

  it('a bad level fails boot with a ConfigurationError naming the FSM', async () => {
    @DurableFsm({ name: 'hist-bad', history: 'everything' as never })
    class BadFsm {
      @Step() start() {
        return done();
      }
    }
    const err = await bootError([BadFsm]);
    expect(err).toBeInstanceOf(ConfigurationError);
    expect((err as ConfigurationError).path).toBe('fsm hist-bad.history');
    expect((err as Error).message).toMatch(/'off', 'failures', 'transitions', 'full'/);
  });

  async function bootError(providers: Provider[]): Promise<unknown> {
    const app = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: await db.dataSource(),
          ...FAST,
          name: 'bad-history',
        }),
      ],
      providers,
    }).compile();
    let open = true;
    trackResource('history failing app', () => open);
    try {
      await app.init();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await app.close().catch(() => undefined);
      open = false;
    }
  }
});
