// The README's first FSM, as a host app writes it.
import {
  awaitSignal,
  done,
  DurableFsm,
  type EngineService,
  next,
  Step,
  type StepContext,
} from 'gen-durable';

type Order = { orderId: string; total?: number };

@DurableFsm({ name: 'first-checkout' })
export class CheckoutFsm {
  @Step() start(ctx: StepContext<Order>) {
    return next('awaitPayment', { ...ctx.state, total: 42 });
  }
  @Step() awaitPayment(ctx: StepContext<Order>) {
    return awaitSignal('paid', 'ship', ctx.state, { timeout: 15 * 60_000 });
  }
  @Step() ship(ctx: StepContext<Order>) {
    return done({ orderId: ctx.state.orderId, paid: ctx.awaited.length > 0 });
  }
}

// With schedulers running: insert, signal by key, await the result.
export async function checkout(engine: EngineService, orderId: string) {
  const id = await engine.insert(CheckoutFsm, {
    state: { orderId },
    correlationKey: `order:${orderId}`,
  });
  await engine.await(id); // settles once the instance parks on 'paid'
  await engine.signal({ correlationKey: `order:${orderId}` }, 'paid', { amount: 42 });
  return engine.await(id, { until: 'terminal', timeout: 30_000 });
}
