import {
  awaitSignal,
  done,
  DuplicateError,
  DurableFsm,
  InvalidInputError,
  NoTargetError,
  Step,
  type StepContext,
} from '../../lib';
import { bootEngine, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// A client whose call's acknowledgement was lost retries it (docs/reliability.md, "After an
// ambiguous answer"): a signal retried with its dedupKey after the instance consumed it and
// finished is the duplicate it is, not NoTargetError; an insert retried with
// onConflict: 'return' answers the id of the instance holding the key, not DuplicateError.

@DurableFsm({ name: 'webhook_order', queue: 'retry-q' })
class OrderFsm {
  @Step() start(ctx: StepContext<Record<string, unknown>>) {
    return awaitSignal('paid', 'finish', ctx.state);
  }
  @Step() finish(ctx: StepContext<Record<string, unknown>>) {
    return done({ signals: ctx.awaited.map((s) => s.name) });
  }
}

describe('retries after an ambiguous answer', () => {
  let db: TestDatabase;
  let h: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    h = await bootEngine(db, [OrderFsm], { queues: { 'retry-q': 2 } });
  });
  afterAll(async () => {
    await h.close();
    await db.drop();
  });

  const parked = async (id: string): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      if ((await h.engine.get({ id }))?.status === 'awaiting_signal') return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`instance ${id} never parked`);
  };

  it('a signal retried with its dedupKey after the instance finished answers success; other deliveries find no target', async () => {
    const id = await h.engine.insert(OrderFsm, { correlationKey: 'order-1' });
    await parked(id);
    await h.engine.signal({ id }, 'paid', { amount: 5 }, { dedupKey: 'evt-1' });
    expect(await h.engine.await(id, { until: 'terminal', timeout: 10_000 })).toEqual({
      kind: 'done',
      result: { signals: ['paid'] },
    });
    // The webhook retries (its first call's answer was lost): the stored duplicate.
    await expect(
      h.engine.signal({ id }, 'paid', { amount: 5 }, { dedupKey: 'evt-1' }),
    ).resolves.toBeUndefined();
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable_signals WHERE target_id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ n: 1 });
    // A new event, or one without a key, is not a duplicate: the instance is gone for it.
    await expect(h.engine.signal({ id }, 'paid', {}, { dedupKey: 'evt-2' })).rejects.toThrow(
      NoTargetError,
    );
    await expect(h.engine.signal({ id }, 'paid', {})).rejects.toThrow(NoTargetError);
    // By key, a finished instance no longer holds the key.
    await expect(
      h.engine.signal({ correlationKey: 'order-1' }, 'paid', {}, { dedupKey: 'evt-1' }),
    ).rejects.toThrow(NoTargetError);
    // No instance at all.
    await expect(
      h.engine.signal({ id: '999999999' }, 'paid', {}, { dedupKey: 'evt-1' }),
    ).rejects.toThrow(NoTargetError);
  });

  it("insert with onConflict: 'return' answers the holder's id; 'error' (the default) is DuplicateError", async () => {
    const first = await h.engine.insert(OrderFsm, { correlationKey: 'order-2' });
    const retried = await h.engine.insert(OrderFsm, {
      correlationKey: 'order-2',
      onConflict: 'return',
    });
    expect(retried).toBe(first);
    await expect(h.engine.insert(OrderFsm, { correlationKey: 'order-2' })).rejects.toThrow(
      DuplicateError,
    );
    await expect(
      h.engine.insert(OrderFsm, { correlationKey: 'order-2', onConflict: 'error' }),
    ).rejects.toThrow(DuplicateError);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM gen_durable WHERE correlation_key = 'order-2'`,
    );
    expect(rows[0]).toEqual({ n: 1 });

    // Once the holder leaves the key's scope (terminal), 'return' inserts a new instance.
    await parked(first);
    await h.engine.signal({ id: first }, 'paid');
    await h.engine.await(first, { until: 'terminal', timeout: 10_000 });
    const next = await h.engine.insert(OrderFsm, {
      correlationKey: 'order-2',
      onConflict: 'return',
    });
    expect(next).not.toBe(first);
    // Without a key there is nothing to conflict on.
    const a = await h.engine.insert(OrderFsm, { onConflict: 'return' });
    const b = await h.engine.insert(OrderFsm, { onConflict: 'return' });
    expect(a).not.toBe(b);
  });

  it('onConflict is validated and belongs to insert() alone', async () => {
    await expect(
      h.engine.insert(OrderFsm, {
        correlationKey: 'order-3',
        onConflict: 'upsert' as unknown as 'return',
      }),
    ).rejects.toThrow(
      new InvalidInputError(
        'insert.onConflict',
        'must be one of error, return, skip, debounce, replace',
      ),
    );
    await expect(
      h.engine.insertAll(OrderFsm, [{ correlationKey: 'order-3', onConflict: 'return' }]),
    ).rejects.toThrow(InvalidInputError);
    await expect(
      h.engine.insertAsync(OrderFsm, { correlationKey: 'order-3', onConflict: 'return' }),
    ).rejects.toThrow(InvalidInputError);
  });
});
