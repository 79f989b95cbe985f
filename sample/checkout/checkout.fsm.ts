import {
  awaitSignal,
  done,
  DurableFsm,
  scheduleChildren,
  Step,
  type StepContext,
  stop,
  type TransactionalStepContext,
} from '../../lib';

import type { Reservation } from './inventory.service';
import { LineItemFsm } from './line-item.fsm';

export interface CheckoutState {
  readonly orderId: string;
  readonly lines: readonly { readonly sku: string; readonly qty: number }[];
  readonly paymentTimeoutMs: number;
}

/** The payment confirmation the PSP webhook delivers (signal `payment_confirmed`). */
export interface PaymentConfirmation {
  readonly amount: number;
  readonly reference: string;
}

/**
 * An order's checkout, one instance per order, keyed `order:<orderId>`:
 * 1. `start` fans out one `line-item` child per line (reservations run in parallel);
 * 2. `reserved` runs once every line finished: a failed line fails the order, else the order
 *    parks on `payment_confirmed` for at most `paymentTimeoutMs`;
 * 3. `paid` runs on the payment (or on the timeout, with nothing awaited). It is transactional
 *    (docs/transactional-steps.md): the order's row in `sample_orders` commits with the
 *    instance's `done`, exactly once; a stop rolls it back.
 */
@DurableFsm({ name: 'checkout', queue: 'checkout' })
export class CheckoutFsm {
  @Step({ next: ['reserved'] }) start(ctx: StepContext<CheckoutState>) {
    const children = ctx.state.lines.map((line, index) => ({
      fsm: LineItemFsm,
      state: { orderId: ctx.state.orderId, sku: line.sku, qty: line.qty },
      correlationKey: `order:${ctx.state.orderId}:line:${index}`,
    }));
    return scheduleChildren('reserved', children, ctx.state);
  }

  @Step({ next: ['paid', '$done'] }) reserved(ctx: StepContext<CheckoutState>) {
    const failed = ctx.children.filter((child) => child.status === 'failed');
    if (failed.length > 0) {
      return stop(`reservation failed: ${failed.map((child) => child.lastError).join('; ')}`);
    }
    return awaitSignal('payment_confirmed', 'paid', ctx.state, {
      timeout: ctx.state.paymentTimeoutMs,
    });
  }

  @Step({ next: ['$done'], transactional: true })
  async paid(ctx: TransactionalStepContext<CheckoutState>) {
    const payment = ctx.awaited[0];
    if (!payment) return stop('payment timed out');
    const lines = ctx.children.map((child) => child.result as Reservation);
    const total = lines.reduce((sum, line) => sum + line.qty * line.unitPrice, 0);
    const confirmation = payment.payload as PaymentConfirmation;
    if (confirmation.amount !== total) {
      return stop(`paid ${confirmation.amount}, expected ${total}`);
    }
    await ctx.manager.query(
      `INSERT INTO sample_orders (order_id, total, reference) VALUES ($1, $2, $3)`,
      [ctx.state.orderId, total, confirmation.reference],
    );
    return done({ total, reference: confirmation.reference, lines: lines.map((l) => ({ ...l })) });
  }
}
