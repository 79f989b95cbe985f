import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';

import { AppModule } from '../../sample/app.module';
import { eventually } from '../support/engine-harness';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

// The sample's checkout flow over HTTP (sample/checkout): an order is a Checkout FSM keyed
// `order:<id>` that fans out one line-item child per line, joins them, parks on
// `payment_confirmed` with a timeout; the payment webhook signals it by key; the status route
// awaits briefly and answers 200 with the outcome or 202 with Retry-After.
describe('sample checkout over HTTP', () => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  const previousUrl = process.env['DATABASE_URL'];
  const http = () => request(app!.getHttpServer());

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    process.env['DATABASE_URL'] = db.url;
    app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await app.listen(0);
  });

  afterAll(async () => {
    await app?.close();
    if (previousUrl === undefined) delete process.env['DATABASE_URL'];
    else process.env['DATABASE_URL'] = previousUrl;
    await db.drop();
  });

  /** GET /orders/:id until it answers 200 (each 202 must carry Retry-After). */
  async function settledOrder(
    orderId: string,
    timeoutMs = 15_000,
  ): Promise<Record<string, unknown>> {
    const response = await eventually(
      async () => {
        const r = await http().get(`/orders/${orderId}`);
        if (r.status === 202) {
          expect(r.headers['retry-after']).toBe('1');
          return undefined;
        }
        return r;
      },
      timeoutMs,
      100,
    );
    expect(response.status).toBe(200);
    return response.body as Record<string, unknown>;
  }

  it("README's curl requests, bodies as printed, answer what their comments say", async () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
    const block =
      /The bodies are those of `sample\/checkout\/checkout\.controller\.ts`:\n\n```sh\n([\s\S]*?)```/.exec(
        readme,
      )?.[1];
    expect(block).toBeDefined();
    const posts = [...block!.matchAll(/localhost:3000(\/\S+) .*\\\n\s*-d '([^']+)'/g)].map(
      ([, path, body]) => ({ path: path!, body: JSON.parse(body!) as object }),
    );
    expect(posts.map((p) => p.path)).toEqual(['/orders', '/orders/R-1/payment']);
    const created = await http().post(posts[0]!.path).send(posts[0]!.body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ orderId: 'R-1', instanceId: expect.any(String) });
    await eventually(async () => (await http().get('/orders/R-1')).status === 202 || undefined);
    for (let attempt = 0; attempt < 2; attempt++) {
      // Twice: the second is the deduplicated retry of the webhook.
      const paid = await eventually(async () => {
        const r = await http().post(posts[1]!.path).send(posts[1]!.body);
        return r.status === 202 ? r : undefined;
      });
      expect(paid.status).toBe(202);
    }
    expect(await settledOrder('R-1')).toBeDefined();
  });

  it('order → line reservations joined → awaiting payment (202) → payment by key → paid (200)', async () => {
    const created = await http()
      .post('/orders')
      .send({
        orderId: 'A-1001',
        lines: [
          { sku: 'book', qty: 1 },
          { sku: 'pen', qty: 3 },
        ],
      })
      .expect(201);
    expect(created.body).toEqual({ orderId: 'A-1001', instanceId: expect.stringMatching(/^\d+$/) });
    const instanceId = created.body.instanceId as string;

    const waiting = await eventually(async () => {
      const r = await http().get('/orders/A-1001');
      return r.status === 202 && r.body.status === 'awaiting_payment' ? r : undefined;
    });
    expect(waiting.headers['retry-after']).toBe('1');
    expect(waiting.body).toEqual({ orderId: 'A-1001', status: 'awaiting_payment', step: 'paid' });
    // The fan-out: one child per line, both finished before the parent parked on the payment.
    const { rows: children } = await db.pool.query<{
      fsm: string;
      status: string;
      correlation_key: string;
    }>(
      `SELECT fsm, status, correlation_key FROM gen_durable WHERE parent_id = $1 ORDER BY correlation_key`,
      [instanceId],
    );
    expect(children).toEqual([
      { fsm: 'line-item', status: 'done', correlation_key: 'order:A-1001:line:0' },
      { fsm: 'line-item', status: 'done', correlation_key: 'order:A-1001:line:1' },
    ]);

    // The PSP retries its webhook: the same reference is stored once.
    await http()
      .post('/orders/A-1001/payment')
      .send({ amount: 18, reference: 'psp_77' })
      .expect(202, { accepted: true });
    await http()
      .post('/orders/A-1001/payment')
      .send({ amount: 18, reference: 'psp_77' })
      .expect(202, { accepted: true });
    expect(await settledOrder('A-1001')).toEqual({
      orderId: 'A-1001',
      status: 'paid',
      total: 18,
      reference: 'psp_77',
      lines: [
        { sku: 'book', qty: 1, unitPrice: 12 },
        { sku: 'pen', qty: 3, unitPrice: 2 },
      ],
    });
    const { rows: signals } = await db.pool.query(
      `SELECT name, dedup_key FROM gen_durable_signals WHERE target_id = $1`,
      [instanceId],
    );
    expect(signals).toEqual([{ name: 'payment_confirmed', dedup_key: 'psp_77' }]);
    // A retry after completion is still accepted; a different payment is refused.
    await http()
      .post('/orders/A-1001/payment')
      .send({ amount: 18, reference: 'psp_77' })
      .expect(202, { accepted: true });

    // Finished, but its key is held (the order scope includes done): one checkout per order id.
    await http()
      .post('/orders')
      .send({ orderId: 'A-1001', lines: [{ sku: 'mug', qty: 1 }] })
      .expect(409);
    await http()
      .post('/orders/A-1001/payment')
      .send({ amount: 18, reference: 'psp_78' })
      .expect(409);
  });

  it('a line without stock fails the order once every line finished', async () => {
    await http()
      .post('/orders')
      .send({
        orderId: 'B-1',
        lines: [
          { sku: 'ink', qty: 1 },
          { sku: 'sold-out', qty: 1 },
        ],
      })
      .expect(201);
    expect(await settledOrder('B-1')).toEqual({
      orderId: 'B-1',
      status: 'failed',
      error: 'reservation failed: no stock left for sold-out',
    });
  });

  it('an unpaid order times out (the reaper’s deadline sweep wakes it with nothing awaited)', async () => {
    const created = await http()
      .post('/orders')
      .send({ lines: [{ sku: 'mug', qty: 2 }], paymentTimeoutMs: 300 })
      .expect(201);
    const orderId = created.body.orderId as string;
    expect(await settledOrder(orderId, 30_000)).toEqual({
      orderId,
      status: 'failed',
      error: 'payment timed out',
    });
  });

  it('unknown orders are 404, bad input is 400', async () => {
    await http().get('/orders/nope').expect(404);
    await http().post('/orders/nope/payment').send({ amount: 1, reference: 'r' }).expect(404);
    await http().post('/orders').send({ lines: [] }).expect(400);
    await http()
      .post('/orders')
      .send({ orderId: 'bad id!', lines: [{ sku: 'pen', qty: 1 }] })
      .expect(400);
    await http()
      .post('/orders')
      .send({ lines: [{ sku: 'pen', qty: 0 }] })
      .expect(400);
    await http().post('/orders/A-1001/payment').send({ amount: 'ten' }).expect(400);
  });
});
