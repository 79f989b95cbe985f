import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';

import { DuplicateError, EngineService } from '../../lib';
import { CheckoutFsm } from '../checkout/checkout.fsm';
import { SendEmailJob } from '../notifications/send-email.job';

/** The sample inventory's prices (sample/checkout/inventory.service.ts): the customer pays the exact total. */
const PRICES: Readonly<Record<string, number>> = { book: 12, pen: 2, ink: 5, mug: 9 };

const ORDERS = [
  {
    orderId: 'demo-1',
    customerId: 'ada',
    lines: [
      { sku: 'book', qty: 1 },
      { sku: 'pen', qty: 3 },
    ],
  },
  { orderId: 'demo-2', customerId: 'ada', lines: [{ sku: 'mug', qty: 2 }] },
  { orderId: 'demo-3', customerId: 'linus', lines: [{ sku: 'book', qty: 2 }] },
];

/**
 * With `SAMPLE_SEED=1` (set by `npm run sample`), seeds a few orders at boot and plays the
 * customer: pays each order once it waits for payment, then queues receipt emails, so the
 * transition log shows fan-out, join, signal, rate limiting and concurrency keys at work.
 * Orders already seeded by an earlier run are skipped (their keys are occupied).
 */
@Injectable()
export class DemoSeeder implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Demo');
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(private readonly engine: EngineService) {}

  onApplicationBootstrap(): void {
    if (process.env['SAMPLE_SEED'] !== '1') return;
    this.running = this.play().catch((err: unknown) =>
      this.logger.error(`demo stopped: ${String(err)}`),
    );
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** `await` answers as soon as the order parks — on its line items first, then on the payment. */
  private async untilAwaitingPayment(id: string): Promise<boolean> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !this.stopped) {
      const answer = await this.engine.await(id, { timeout: 1000 });
      if (answer.kind === 'awaiting' && answer.snapshot.status === 'awaiting_signal') return true;
      if (answer.kind !== 'awaiting' && answer.kind !== 'busy') return false;
      if (answer.kind === 'awaiting') await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return false;
  }

  private async play(): Promise<void> {
    for (const order of ORDERS) {
      if (this.stopped) return;
      try {
        const id = await this.engine.insert(CheckoutFsm, {
          state: { orderId: order.orderId, lines: order.lines, paymentTimeoutMs: 60_000 },
          correlationKey: `order:${order.orderId}`,
          correlationScope: [
            'runnable',
            'executing',
            'awaiting_signal',
            'awaiting_children',
            'done',
            'failed',
          ],
        });
        this.logger.log(`seeded order ${order.orderId} as checkout#${id}`);
        if (!(await this.untilAwaitingPayment(id))) {
          this.logger.warn(`order ${order.orderId} did not reach payment`);
          continue;
        }
        const total = order.lines.reduce(
          (sum, line) => sum + line.qty * (PRICES[line.sku] ?? 0),
          0,
        );
        await this.engine.signal(
          { correlationKey: `order:${order.orderId}` },
          'payment_confirmed',
          {
            amount: total,
            reference: `demo-payment-${order.orderId}`,
          },
          { dedupKey: `demo-payment-${order.orderId}` },
        );
        this.logger.log(`paid order ${order.orderId}`);
        const paid = await this.engine.await(id, { until: 'terminal', timeout: 10_000 });
        this.logger.log(`order ${order.orderId} → ${JSON.stringify(paid)}`);
        for (const subject of ['Thanks for your order', 'Your receipt', 'Your order has shipped']) {
          await this.engine.insert(SendEmailJob, {
            args: {
              customerId: order.customerId,
              to: `${order.customerId}@example.com`,
              subject: `${subject} (${order.orderId})`,
            },
            rateLimit: 'email',
            concurrencyKey: ['customer', order.customerId],
          });
        }
      } catch (err) {
        if (err instanceof DuplicateError) {
          this.logger.log(`order ${order.orderId} was seeded by an earlier run`);
        } else throw err;
      }
    }
  }
}
