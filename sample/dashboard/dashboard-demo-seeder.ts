import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';

import { DuplicateError, EngineService } from '../../lib';
import { ALL_STATUSES } from '../../lib/gen-durable.constants';
import { CheckoutFsm } from '../checkout/checkout.fsm';

/**
 * With `SAMPLE_SEED=1`, leaves instances for the dashboard to show beside the paid orders of
 * DemoSeeder: an order parked on its payment (a day's timeout), an order failed by a sold-out
 * line (a fan-out tree with a failed child) and a cancelled order. Skipped when an earlier run
 * seeded them (their keys are occupied).
 */
@Injectable()
export class DashboardDemoSeeder implements OnApplicationBootstrap {
  private readonly logger = new Logger('Demo');

  constructor(private readonly engine: EngineService) {}

  async onApplicationBootstrap(): Promise<void> {
    if (process.env['SAMPLE_SEED'] !== '1') return;
    const seed = async (
      orderId: string,
      lines: { sku: string; qty: number }[],
      scheduleIn?: number,
    ) => {
      try {
        return await this.engine.insert(CheckoutFsm, {
          state: { orderId, lines, paymentTimeoutMs: 86_400_000 },
          correlationKey: `order:${orderId}`,
          correlationScope: [...ALL_STATUSES],
          ...(scheduleIn ? { scheduleIn } : {}),
        });
      } catch (err) {
        if (err instanceof DuplicateError) return undefined;
        throw err;
      }
    };
    await seed('demo-unpaid', [{ sku: 'book', qty: 1 }]);
    await seed('demo-sold-out', [
      { sku: 'pen', qty: 1 },
      { sku: 'sold-out', qty: 1 },
    ]);
    const later = await seed('demo-cancelled', [{ sku: 'ink', qty: 1 }], 3_600_000);
    if (later !== undefined) {
      await this.engine.cancel(later, { reason: 'customer changed their mind' });
    }
    this.logger.log('seeded dashboard demo orders (unpaid, sold out, cancelled)');
  }
}
