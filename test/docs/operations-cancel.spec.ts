import type { Type } from '@nestjs/common';

import type { AwaitResult, EngineService } from '../../lib';
import { bootEngine, eventually, type Harness } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { loadDocExample, typeErrors, writeDocExample } from './support/doc-example';

// Runs the "Cancelling" and "Retrying" examples of docs/operations-control.md exactly as the
// page shows them, and type-checks them.
describe('docs/operations-control.md: cancelling and retrying', () => {
  let db: TestDatabase;
  let t: Harness;
  const cancel = loadDocExample<{
    ShipmentFsm: Type<unknown>;
    OrderShippingFsm: Type<unknown>;
    cancelExample(engine: EngineService): Promise<{ stopped: number; answer: AwaitResult }>;
  }>('operations-control.md', 'cancel');
  const retry = loadDocExample<{
    InvoiceFsm: Type<unknown>;
    retryExample(engine: EngineService): Promise<{ failed: AwaitResult; fixed: AwaitResult }>;
  }>('operations-control.md', 'retry');

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await bootEngine(
      db,
      [cancel.module.ShipmentFsm, cancel.module.OrderShippingFsm, retry.module.InvoiceFsm],
      { queues: { shipments: 2, invoices: 1 } },
    );
  });
  afterAll(async () => {
    await t.close();
    await db.drop();
  });

  it('cancels the order and its shipments, as the page says', async () => {
    const result = await cancel.module.cancelExample(t.engine);
    expect(result).toEqual({
      stopped: 3,
      answer: { kind: 'cancelled', reason: 'customer withdrew' },
    });
    expect(cancel.source).toContain(
      `// → { stopped: 3, answer: { kind: 'cancelled', reason: 'customer withdrew' } }`,
    );
    // A shipment whose step ran at that moment ends cancelled when its step returns.
    await eventually(async () => {
      const { rows } = await db.pool.query<{ status: string }>(
        `SELECT status::text FROM gen_durable WHERE fsm IN ('order-shipping', 'shipment') ORDER BY id`,
      );
      return rows.length === 3 && rows.every((r) => r.status === 'cancelled');
    });
  });

  it('retries the invoice after the fix, as the page says', async () => {
    const result = await retry.module.retryExample(t.engine);
    expect(result).toEqual({
      failed: { kind: 'failed', error: 'no VAT rate' },
      fixed: { kind: 'done', result: { total: 120 } },
    });
    expect(retry.source).toContain(`fixed: { kind: 'done', result: { total: 120 } } }`);
  });

  it('compiles under the strict tsconfig', () => {
    const files = ['cancel', 'retry'].map(
      (name) => writeDocExample('operations-control.md', name).file,
    );
    expect(typeErrors(files)).toEqual([]);
  }, 120_000);
});
