import { Module } from '@nestjs/common';

import { CheckoutController } from './checkout.controller';
import { CheckoutFsm } from './checkout.fsm';
import { InventoryService } from './inventory.service';
import { LineItemFsm } from './line-item.fsm';

/**
 * The checkout flow: two FSM providers (found by the engine through discovery), the service
 * one of them injects, and the HTTP API. The engine itself comes from the global
 * GenDurableModule in AppModule.
 */
@Module({
  controllers: [CheckoutController],
  providers: [CheckoutFsm, LineItemFsm, InventoryService],
})
export class CheckoutModule {}
