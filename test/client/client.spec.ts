import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import { Pool } from 'pg';

import {
  awaitSignal,
  done,
  DurableFsm,
  DuplicateError,
  FsmNotRegisteredError,
  InvalidInputError,
  NoTargetError,
  NotAvailableError,
  Step,
  type StepContext,
  stop,
  UnknownStepError,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// GenDurableClient against a running engine (docs/design.md §32; docs/client.md). The engine
// polls once a minute, so an instance the client inserts, signals, retries or resumes runs
// within a test only because the client's NOTIFY poke reached the engine's listener.

@DurableFsm({ name: 'greeter' })
class GreeterFsm {
  @Step() start(ctx: StepContext<{ name: string }>) {
    return done({ greeting: `hello ${ctx.state.name}` });
  }
}

@DurableFsm({ name: 'waiter', cancelOn: ['abort'] })
class WaiterFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext) {
    return done({ got: ctx.awaited[0]?.payload ?? null });
  }
}

@DurableFsm({ name: 'flaky' })
class FlakyFsm {
  @Step() start() {
    return stop('broken on purpose');
  }
  @Step() repaired() {
    return done({ repaired: true });
  }
}

const FSMS = {
  greeter: { initial: 'start', steps: ['start'] },
  waiter: { initial: 'start', steps: ['start', 'finish'], cancelOn: ['abort'] },
};

describe('GenDurableClient (docs/design.md §32)', () => {
  let db: TestDatabase;
  let h: Harness;
  let client: GenDurableClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [GreeterFsm, WaiterFsm, FlakyFsm], {
      queues: { default: 4 },
      poke: 'postgres',
      pollInterval: 60_000,
      maxPollInterval: 60_000,
      schedules: { prune: false, interval: 60_000 },
    });
    client = new GenDurableClient(db.pool, { fsms: FSMS });
  });

  afterAll(async () => {
    await client?.close();
    await h?.close();
    await db?.drop();
  });

  const terminal = (id: string) => h.engine.await(id, { until: 'terminal', timeout: 15_000 });

  it('inserts by FSM name; the engine runs it to completion (woken by the poke)', async () => {
    const id = await client.insert('greeter', { state: { name: 'ada' } });
    expect(await terminal(id)).toEqual({ kind: 'done', result: { greeting: 'hello ada' } });
    const row = await client.get(id);
    expect(row).toMatchObject({ fsm: 'greeter', fsmVersion: 1, step: 'start', status: 'done' });
  });

  it('inserts an FSM not described when given its step, and refuses one without', async () => {
    await expect(client.insert('flaky')).rejects.toThrow(InvalidInputError);
    await expect(client.insert('greeter', { step: 'nope' })).rejects.toThrow(UnknownStepError);
    await expect(client.insert('greeter', { manager: {} } as never)).rejects.toThrow(
      InvalidInputError,
    );
    const id = await client.insert('flaky', { step: 'repaired' });
    expect(await terminal(id)).toEqual({ kind: 'done', result: { repaired: true } });
  });

  it('instance deadlines: the described FSM default, and the insert options that win over it', async () => {
    const described = new GenDurableClient(db.pool, {
      fsms: { ...FSMS, waiter: { ...FSMS.waiter, deadlineMs: 3_600_000 } },
    });
    try {
      const span = async (id: string): Promise<number> => {
        const view = await described.get(id);
        return view!.deadline!.getTime() - view!.insertedAt.getTime();
      };
      expect(await span(await described.insert('waiter'))).toBe(3_600_000);
      expect(await span(await described.insert('waiter', { deadlineInMs: 5000 }))).toBe(5000);
      expect((await client.get(await client.insert('waiter')))!.deadline).toBeNull();
      expect(
        () => new GenDurableClient(db.pool, { fsms: { w: { initial: 'start', deadlineMs: 0 } } }),
      ).toThrow(/client\.fsms\.w\.deadlineMs/);
    } finally {
      await described.close();
    }
  });

  it('a correlation key: DuplicateError, or the holder with onConflict return', async () => {
    const first = await client.insert('waiter', { correlationKey: 'order-1' });
    await expect(client.insert('waiter', { correlationKey: 'order-1' })).rejects.toThrow(
      DuplicateError,
    );
    expect(await client.insert('waiter', { correlationKey: 'order-1', onConflict: 'return' })).toBe(
      first,
    );
    await client.cancel({ correlationKey: 'order-1' });
  });

  it('a signal wakes a waiting instance', async () => {
    const id = await client.insert('waiter');
    await h.engine.await(id, { timeout: 15_000 });
    expect((await client.get(id))?.status).toBe('awaiting_signal');
    await client.signal(id, 'go', { n: 7 });
    expect(await terminal(id)).toEqual({ kind: 'done', result: { got: { n: 7 } } });
    await expect(client.signal(id, 'go')).rejects.toThrow(NoTargetError);
  });

  it('a signal in a described cancelOn cancels, as the engine delivery does', async () => {
    const id = await client.insert('waiter', { correlationKey: 'abort-me' });
    await h.engine.await(id, { timeout: 15_000 });
    await client.signal({ correlationKey: 'abort-me' }, 'abort');
    expect(await terminal(id)).toEqual({ kind: 'cancelled', reason: 'signal abort' });
  });

  it('cancel and retry are seen by the engine', async () => {
    const waiting = await client.insert('waiter');
    await h.engine.await(waiting, { timeout: 15_000 });
    const cancelled = await client.cancel(waiting, { reason: 'operator' });
    expect(cancelled).toEqual({ cancelled: [waiting], requested: [], alreadyTerminal: [] });
    expect(await h.engine.await(waiting)).toEqual({ kind: 'cancelled', reason: 'operator' });

    const broken = await client.insert('flaky', { step: 'start' });
    expect(await terminal(broken)).toEqual({ kind: 'failed', error: 'broken on purpose' });
    await client.retry(broken, { step: 'repaired' });
    expect(await terminal(broken)).toEqual({ kind: 'done', result: { repaired: true } });
    await expect(client.retry(broken)).rejects.toThrow(InvalidInputError);
  });

  it('pause holds the queue on the engine until resume', async () => {
    const paused = await client.pauseQueue('default', { reason: 'maintenance' });
    expect(paused).toMatchObject({ queue: 'default', reason: 'maintenance', created: true });
    const [status] = await h.engine.queueStatus('default');
    expect(status).toMatchObject({ paused: true, reason: 'maintenance', served: true });
    const id = await client.insert('greeter', { state: { name: 'later' } });
    expect((await client.get(id))?.status).toBe('runnable');
    const mine = await client.queueStatus('default');
    expect(mine[0]).toMatchObject({ queue: 'default', paused: true, served: false });
    expect(await client.resumeQueue('default')).toMatchObject({ wasPaused: true, known: true });
    expect(await terminal(id)).toMatchObject({ kind: 'done' });
  });

  it('list, count and history read what the engine reads', async () => {
    await terminal(await client.insert('greeter', { state: { name: 'listed' } }));
    const page = await client.list({ fsm: 'greeter', status: 'done' }, { limit: 2 });
    expect(page.items.length).toBeGreaterThan(0);
    expect(page.items.every((i) => i.fsm === 'greeter' && i.status === 'done')).toBe(true);
    expect(await client.count({ fsm: 'greeter' })).toEqual(
      await h.engine.count({ fsm: 'greeter' }),
    );
    const broken = await client.insert('flaky', { step: 'start' });
    await terminal(broken);
    expect(await client.history(broken)).toEqual(await h.engine.history(broken));
    await expect(client.history('999999999')).rejects.toThrow(NoTargetError);
  });

  it('inbox, explain, queueBacklog, liveFsmVersions and the bulk dry runs answer as the engine’s', async () => {
    const id = await client.insert('waiter', { correlationKey: 'inboxed' });
    await h.engine.await(id, { timeout: 15_000 });
    await client.signal(id, 'unrelated', { n: 1 });
    const inbox = await client.inbox({ correlationKey: 'inboxed' });
    expect(inbox).toEqual(await h.engine.inbox(id));
    expect(inbox).toMatchObject([{ name: 'unrelated', payload: { n: 1 }, consumedAt: null }]);
    await expect(client.inbox({ correlationKey: 'no-such-key' })).rejects.toThrow(NoTargetError);
    await expect(client.inbox(id, { limit: 0 })).rejects.toThrow(InvalidInputError);

    // The client has no node: the node-local reasons are left out, the row's reasons are the same.
    const codes = (e: { reasons: readonly { code: string }[] }) => e.reasons.map((r) => r.code);
    expect(codes(await client.explain(id))).toEqual(
      codes(await h.engine.explain(id)).filter((c) => c !== 'queue_not_served'),
    );
    await expect(client.explain('999999999')).rejects.toThrow(NoTargetError);

    expect(await client.queueBacklog(['default'], { cap: 1 })).toEqual([
      expect.objectContaining({ queue: 'default', paused: false }),
    ]);
    expect(await client.liveFsmVersions()).toEqual(await h.engine.liveFsmVersions());
    expect(await client.liveFsmVersions()).toContainEqual(
      expect.objectContaining({ fsm: 'waiter', version: 1 }),
    );
    const filter = { fsm: 'waiter', correlationKey: 'inboxed' };
    expect(await client.cancelAll(filter, { dryRun: true })).toEqual(
      await h.engine.cancelAll(filter, { dryRun: true }),
    );
    expect(await client.cancelAll(filter)).toMatchObject({ matched: 1, changed: 1 });
    expect((await h.engine.get(id))?.status).toBe('cancelled');
  });

  it('what needs the FSM classes or the engines’ limiter refuses with NotAvailableError', async () => {
    expect(() => client.graph('greeter')).toThrow(NotAvailableError);
    expect(() => client.registeredFsms()).toThrow(NotAvailableError);
    await expect(client.stepCounts('greeter')).rejects.toThrow(NotAvailableError);
    await expect(client.limiterStatus()).rejects.toThrow(NotAvailableError);
    const id = await client.insert('greeter', { state: { name: 'forked' } });
    await expect(client.fork(id)).rejects.toMatchObject({
      code: 'GD_NOT_AVAILABLE',
      operation: 'fork',
    });
    expect(h.engine.registeredFsms().map((f) => f.name)).toEqual(['flaky', 'greeter', 'waiter']);
  });

  it('schedules: list, pause, resume, trigger (a described FSM), remove', async () => {
    await h.engine.schedules.upsert({
      name: 'nightly',
      fsm: 'greeter',
      cron: '0 3 * * *',
      state: { name: 'cron' },
    });
    await h.engine.schedules.upsert({ name: 'other', fsm: 'flaky', cron: '0 3 * * *' });
    expect((await client.schedules.list()).map((s) => s.name)).toEqual(['nightly', 'other']);
    expect(await client.schedules.pause('nightly')).toMatchObject({ paused: true });
    expect(await client.schedules.resume('nightly')).toMatchObject({ paused: false });
    const id = await client.schedules.trigger('nightly');
    expect(await terminal(id)).toEqual({ kind: 'done', result: { greeting: 'hello cron' } });
    await expect(client.schedules.trigger('other')).rejects.toThrow(FsmNotRegisteredError);
    await client.schedules.remove('other');
    expect(await client.schedules.get('other')).toBeNull();
  });

  it('closes a pool it created, never one it was given', async () => {
    const given = new Pool({ connectionString: db.url, max: 1 });
    const onGiven = new GenDurableClient(given);
    await onGiven.close();
    expect((await given.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await given.end();
    const owning = new GenDurableClient(db.url);
    expect(await owning.count()).toMatchObject({ capped: false });
    await owning.close();
    expect((owning as unknown as { pool: Pool }).pool.ended).toBe(true);
  });

  it('loads no NestJS, TypeORM or rxjs', () => {
    const root = join(__dirname, '..', '..');
    const loaded = execFileSync(
      process.execPath,
      [
        '-r',
        './test/support/ts-register.cjs',
        '-e',
        "require('./lib/client'); console.log(JSON.stringify(Object.keys(require.cache).filter((f) => /node_modules\\/(@nestjs|typeorm|rxjs)\\//.test(f))))",
      ],
      { cwd: root, encoding: 'utf8' },
    );
    expect(JSON.parse(loaded)).toEqual([]);
  });
});
