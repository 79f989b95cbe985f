// The README's "Errors over HTTP": an order controller whose engine errors reach the client as
// typed statuses through GenDurableExceptionFilter (registered in AppModule as APP_FILTER).
import { Controller, Param, Post } from '@nestjs/common';
import { EngineService } from 'gen-durable';

import { CheckoutFsm } from './checkout.fsm.js';

@Controller('orders')
export class OrdersController {
  constructor(private readonly engine: EngineService) {}

  /** 201 with the id; 409 (DuplicateError) when the order already has a live instance. */
  @Post(':orderId')
  async create(@Param('orderId') orderId: string): Promise<{ id: string }> {
    const id = await this.engine.insert(CheckoutFsm, {
      state: { orderId },
      correlationKey: `order:${orderId}`,
    });
    return { id };
  }

  /** 201; 404 (NoTargetError) when no instance carries the order's key. */
  @Post(':orderId/paid')
  async paid(@Param('orderId') orderId: string): Promise<{ ok: true }> {
    await this.engine.signal({ correlationKey: `order:${orderId}` }, 'paid', { amount: 42 });
    return { ok: true };
  }
}
