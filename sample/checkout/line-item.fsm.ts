import { done, DurableFsm, Step, type StepContext, stop } from '../../lib';

import { InventoryService } from './inventory.service';

export interface LineItemState {
  readonly orderId: string;
  readonly sku: string;
  readonly qty: number;
}

/**
 * One child per order line: reserves stock and finishes with the reservation, or fails with
 * the reason. The checkout parent joins on all of them (docs/children.md).
 */
@DurableFsm({ name: 'line-item', queue: 'default' })
export class LineItemFsm {
  constructor(private readonly inventory: InventoryService) {}

  @Step({ next: ['$done'] }) start(ctx: StepContext<LineItemState>) {
    try {
      const reservation = this.inventory.reserve(ctx.state.sku, ctx.state.qty);
      return done({ ...reservation });
    } catch (err) {
      return stop(err);
    }
  }
}
