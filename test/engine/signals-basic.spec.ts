import { awaitSignal, done, DurableFsm, NoTargetError, Step, type StepContext } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/** When set, `ship` waits for it: keeps a woken instance live while a test signals it again. */
let shipGate: Promise<void> | undefined;

@DurableFsm({ name: 'checkout' })
class CheckoutFsm {
  @Step() start(ctx: StepContext) {
    return awaitSignal('paid', 'ship', ctx.state);
  }
  @Step() async ship(ctx: StepContext) {
    await shipGate;
    return done({ paid: ctx.awaited.map((s) => s.payload) });
  }
}

describe('signals: delivery and parking', () => {
  let db: TestDatabase;
  let t: Harness;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(db, [CheckoutFsm]);
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('parks, wakes on the signal and consumes it', async () => {
    const id = await t.engine.insert(CheckoutFsm, { correlationKey: 'order:1' });
    expect(await t.engine.await(id)).toMatchObject({
      kind: 'awaiting',
      snapshot: { status: 'awaiting_signal', step: 'ship' },
    });
    await t.engine.signal({ correlationKey: 'order:1' }, 'paid', { amount: 100 });
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { paid: [{ amount: 100 }] },
    });
    const { rows } = await db.pool.query(
      `SELECT consumed_at FROM gen_durable_signals WHERE target_id = $1`,
      [id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].consumed_at).not.toBeNull();
  });

  it('a signal delivered before the park wakes it at once (recheck)', async () => {
    const id = await t.engine.insert(CheckoutFsm, { scheduleIn: 300 });
    await t.engine.signal({ id }, 'paid', { early: true });
    expect(await t.engine.await(id, { until: 'terminal', timeout: 5000 })).toEqual({
      kind: 'done',
      result: { paid: [{ early: true }] },
    });
  });

  it('NoTargetError for missing and terminal targets; dedup answers success once', async () => {
    await expect(t.engine.signal({ id: '999999' }, 'paid')).rejects.toBeInstanceOf(NoTargetError);
    const id = await t.engine.insert(CheckoutFsm);
    await eventually(async () => (await t.engine.get({ id }))?.status === 'awaiting_signal');
    // The woken step waits until the duplicate was sent: otherwise the instance may already
    // have finished, and the duplicate would (rightly) be refused as NoTargetError.
    let openShip!: () => void;
    shipGate = new Promise<void>((resolve) => (openShip = resolve));
    try {
      await t.engine.signal({ id }, 'paid', { n: 1 }, { dedupKey: 'hook-1' });
      await t.engine.signal({ id }, 'paid', { n: 2 }, { dedupKey: 'hook-1' });
    } finally {
      openShip();
      shipGate = undefined;
    }
    expect(await t.engine.await(id, { until: 'terminal' })).toEqual({
      kind: 'done',
      result: { paid: [{ n: 1 }] },
    });
    await expect(t.engine.signal({ id }, 'paid')).rejects.toBeInstanceOf(NoTargetError);
    await expect(t.engine.signal({ correlationKey: 'nobody' }, 'paid')).rejects.toBeInstanceOf(
      NoTargetError,
    );
  });
});
