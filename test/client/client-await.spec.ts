import { Pool } from 'pg';

import {
  awaitSignal,
  done,
  DurableFsm,
  InvalidInputError,
  Step,
  type StepContext,
  stop,
} from '../../lib';
import { GenDurableClient } from '../../lib/client';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// GenDurableClient.await (docs/client.md "Awaiting an instance"): the engine's await
// (docs/design.md §9) on a face that runs no engine, by polling the row with backoff. Every
// answer is compared with the engine's own `await` of the same instance.

@DurableFsm({ name: 'await_greeter' })
class GreeterFsm {
  @Step() start(ctx: StepContext<{ name: string }>) {
    return done({ greeting: `hello ${ctx.state.name}` });
  }
}

@DurableFsm({ name: 'await_waiter' })
class WaiterFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('go', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext) {
    return done({ got: ctx.awaited[0]?.payload ?? null });
  }
}

@DurableFsm({ name: 'await_failing' })
class FailingFsm {
  @Step() start() {
    return stop('broken on purpose');
  }
}

describe('GenDurableClient.await (docs/design.md §9, §32)', () => {
  let db: TestDatabase;
  let h: Harness;
  let client: GenDurableClient;
  let counted: Pool;
  let reads = 0;
  let countingClient: GenDurableClient;

  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [GreeterFsm, WaiterFsm, FailingFsm], {
      queues: { default: 4 },
      poke: 'postgres',
      pollInterval: 60_000,
      maxPollInterval: 60_000,
    });
    client = new GenDurableClient(db.pool);
    counted = new Pool({ connectionString: db.url, max: 1 });
    counted.on('acquire', () => {
      reads += 1;
    });
    countingClient = new GenDurableClient(counted, { preparedStatements: false });
  });

  afterAll(async () => {
    await countingClient?.close();
    await counted?.end();
    await client?.close();
    await h?.close();
    await db?.drop();
  });

  const terminal = { until: 'terminal', timeout: 15_000 } as const;

  it('awaits a running instance to done, as the engine answers', async () => {
    const id = await client.insert('await_greeter', { step: 'start', state: { name: 'ada' } });
    const answer = await client.await(id, terminal);
    expect(answer).toEqual({ kind: 'done', result: { greeting: 'hello ada' } });
    expect(await h.engine.await(id, terminal)).toEqual(answer);
  });

  it('awaits a running instance to failed, as the engine answers', async () => {
    const id = await client.insert('await_failing', { step: 'start' });
    const answer = await client.await(id, terminal);
    expect(answer).toMatchObject({ kind: 'failed' });
    expect(answer.kind === 'failed' && answer.error).toContain('broken on purpose');
    expect(await h.engine.await(id, terminal)).toEqual(answer);
  });

  it('settles on a parked row; until terminal waits on through a cancel', async () => {
    const id = await client.insert('await_waiter', { step: 'start', correlationKey: 'w-1' });
    const parked = await client.await({ correlationKey: 'w-1' }, { timeout: 15_000 });
    expect(parked).toEqual({
      kind: 'awaiting',
      snapshot: { status: 'awaiting_signal', step: 'finish', attempt: 0 },
    });
    expect(await h.engine.await(id, { timeout: 15_000 })).toEqual(parked);

    const ending = client.await(id, terminal);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await client.cancel(id, { reason: 'operator' });
    const answer = await ending;
    expect(answer).toEqual({ kind: 'cancelled', reason: 'operator' });
    expect(await h.engine.await({ correlationKey: 'w-1' }, terminal)).toEqual(answer);
  });

  it('a signal ends the wait with the instance’s result', async () => {
    const id = await client.insert('await_waiter', { step: 'start' });
    await client.await(id, { timeout: 15_000 });
    const ending = client.await(id, terminal);
    await client.signal(id, 'go', { n: 3 });
    expect(await ending).toEqual({ kind: 'done', result: { got: { n: 3 } } });
  });

  it('answers busy with the snapshot at the timeout, as the engine does', async () => {
    const id = await client.insert('await_waiter', { step: 'start' });
    await client.await(id, { timeout: 15_000 });
    const started = Date.now();
    const answer = await client.await(id, { until: 'terminal', timeout: 300 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(answer).toEqual({
      kind: 'busy',
      snapshot: { status: 'awaiting_signal', step: 'finish', attempt: 0 },
    });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 300 })).toEqual(answer);
    expect(await client.await(id, { until: 'terminal', timeout: 0 })).toEqual(answer);
    await client.cancel(id);
  });

  it('polls with backoff: a wait of 1.5 s reads the row a handful of times, not in a loop', async () => {
    const id = await client.insert('await_waiter', { step: 'start' });
    await client.await(id, { timeout: 15_000 });
    reads = 0;
    const answer = await countingClient.await(id, { until: 'terminal', timeout: 1_500 });
    expect(answer.kind).toBe('busy');
    // 25 + 50 + 100 + 200 + 400 + 800 ms pauses: 7 reads; a busy loop would run hundreds.
    expect(reads).toBeGreaterThanOrEqual(5);
    expect(reads).toBeLessThanOrEqual(9);
    await client.cancel(id);
  });

  it('answers an ended instance at once', async () => {
    const id = await client.insert('await_greeter', { step: 'start', state: { name: 'bo' } });
    const answer = await client.await(id, terminal);
    reads = 0;
    const started = Date.now();
    expect(await countingClient.await(id, { timeout: 10_000 })).toEqual(answer);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(reads).toBe(1);
  });

  it('answers not_found for an unknown id or a free key, as the engine does', async () => {
    expect(await client.await('999999999')).toEqual({ kind: 'not_found' });
    expect(await client.await({ correlationKey: 'nobody' })).toEqual({ kind: 'not_found' });
    expect(await h.engine.await('999999999')).toEqual({ kind: 'not_found' });
    expect(await h.engine.await({ correlationKey: 'nobody' })).toEqual({ kind: 'not_found' });
  });

  it('refuses bad targets and options with the engine’s InvalidInputError', async () => {
    const bad: [unknown, unknown, string][] = [
      ['nope', undefined, 'await.target'],
      ['1', { timeout: -1 }, 'await.timeout'],
      ['1', { timeout: 1.5 }, 'await.timeout'],
      ['1', { until: 'done' }, 'await.until'],
    ];
    for (const [target, options, path] of bad) {
      for (const face of [client, h.engine]) {
        const call = face.await(target as never, options as never);
        await expect(call).rejects.toThrow(InvalidInputError);
        await expect(call).rejects.toMatchObject({ path });
      }
    }
  });
});
