// How a host app tests its own FSMs: the engine as a web node, driven inline by
// gen-durable/testing, against a real PostgreSQL (here the repository's per-file test database).
import { Test } from '@nestjs/testing';

import { EngineService, GenDurableModule } from '../../lib';
import { GenDurableTesting } from '../../lib/testing';
import { trackResource } from '../../test/support/open-resources';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database';
import { SAMPLE_ORDERS_DDL } from '../migrations/1700000000001-create-sample-orders';
import { CheckoutFsm } from './checkout.fsm';
import { InventoryService } from './inventory.service';
import { LineItemFsm } from './line-item.fsm';

describe('CheckoutFsm', () => {
  let db: TestDatabase;
  let engine: EngineService;
  let gd: GenDurableTesting;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(SAMPLE_ORDERS_DDL);
    const moduleRef = await Test.createTestingModule({
      imports: [
        GenDurableModule.forRoot({
          dataSource: await db.dataSource(),
          queues: {},
          reaper: false,
          gc: false,
          poke: 'none',
        }),
      ],
      providers: [CheckoutFsm, LineItemFsm, InventoryService],
    }).compile();
    await moduleRef.init();
    let open = true;
    trackResource('checkout testing module', () => open);
    close = async () => {
      await moduleRef.close();
      open = false;
    };
    engine = moduleRef.get(EngineService);
    gd = GenDurableTesting.forEngine(engine);
  });
  afterAll(async () => {
    await close();
    await db.drop();
  });
  beforeEach(() => gd.reset());

  const order = (lines: { sku: string; qty: number }[]) => ({
    state: { orderId: 'o-1', lines, paymentTimeoutMs: 60_000 },
    correlationKey: 'order:o-1',
  });

  it('reserves every line, waits for the payment and completes with the total', async () => {
    const id = await engine.insert(
      CheckoutFsm,
      order([
        { sku: 'book', qty: 1 },
        { sku: 'pen', qty: 3 },
      ]),
    );
    expect(await gd.drain()).toMatchObject({ scheduleChildren: 1, done: 2, await: 1 });
    await gd.assertAwaiting({ id }, 'payment_confirmed');
    await engine.signal({ correlationKey: 'order:o-1' }, 'payment_confirmed', {
      amount: 18,
      reference: 'psp-1',
    });
    await gd.drain();
    await gd.assertDone(
      { id },
      {
        total: 18,
        reference: 'psp-1',
        lines: [
          { sku: 'book', qty: 1, unitPrice: 12 },
          { sku: 'pen', qty: 3, unitPrice: 2 },
        ],
      },
    );
    // The transactional `paid` step's row committed with the outcome.
    const { rows } = await db.pool.query(`SELECT order_id, total, reference FROM sample_orders`);
    expect(rows).toEqual([{ order_id: 'o-1', total: 18, reference: 'psp-1' }]);
  });

  it('fails the order when a line cannot be reserved', async () => {
    const id = await engine.insert(
      CheckoutFsm,
      order([
        { sku: 'book', qty: 1 },
        { sku: 'sold-out', qty: 1 },
      ]),
    );
    await gd.drain();
    await gd.assertFailed({ id }, /reservation failed: no stock left for sold-out/);
  });

  it('fails on a payment timeout and on a wrong amount', async () => {
    const orders = async () =>
      (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM sample_orders`)).rows[0]!
        .n;
    const before = await orders();
    const late = await engine.insert(CheckoutFsm, order([{ sku: 'mug', qty: 1 }]));
    await gd.drain();
    expect(await gd.fireTimeouts()).toBe(1);
    await gd.drain();
    await gd.assertFailed({ id: late }, 'payment timed out');

    const wrong = await engine.insert(CheckoutFsm, {
      ...order([{ sku: 'mug', qty: 1 }]),
      correlationKey: 'order:o-2',
    });
    await gd.drain();
    await engine.signal({ id: wrong }, 'payment_confirmed', { amount: 1, reference: 'psp-2' });
    await gd.drain();
    await gd.assertFailed({ id: wrong }, 'paid 1, expected 9');
    // A stopped `paid` wrote no order row.
    expect(await orders()).toBe(before);
  });
});
