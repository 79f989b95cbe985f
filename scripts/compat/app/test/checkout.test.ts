// A host-app test on gen-durable/testing: the engine as a web node, driven inline by drain().
// (The first line, the test framework's imports, is written by scripts/compat/run-compat.cjs.)
import 'reflect-metadata';

import { Test, type TestingModule } from '@nestjs/testing';
import { EngineService } from 'gen-durable';
import { GenDurableTesting } from 'gen-durable/testing';

import { AppModule } from '../src/app.module.js';
import { CheckoutFsm } from '../src/checkout.fsm.js';
import { SendReceiptJob } from '../src/receipt.job.js';

describe('the compat app under gen-durable/testing', () => {
  let moduleRef: TestingModule;
  let engine: EngineService;
  let gd: GenDurableTesting;

  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({ imports: [AppModule.register('test')] }).compile();
    await moduleRef.init();
    engine = moduleRef.get(EngineService);
    gd = GenDurableTesting.forEngine(engine);
  });

  afterAll(async () => {
    await moduleRef.close();
  });

  it('parks on the signal, then finishes once it is sent', async () => {
    const id = await engine.insert(CheckoutFsm, { state: { orderId: 't-1' } });
    const parked = await gd.drain();
    expect(parked).toMatchObject({ steps: 2, next: 1, await: 1 });
    await engine.signal({ id }, 'paid');
    await gd.drain();
    await gd.assertDone({ id }, { orderId: 't-1', paid: true });
  });

  it('retries a failing job inline', async () => {
    const id = await engine.insert(SendReceiptJob, { args: { to: 'b@example.com' } });
    await gd.drain();
    await gd.assertDone({ id }, { to: 'b@example.com', attempt: 1 });
  });
});
