import { randomUUID } from 'node:crypto';

import {
  BadRequestException,
  Body,
  ConflictException,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  Post,
  Res,
} from '@nestjs/common';

import { DuplicateError, type DurableStatus, EngineService, NoTargetError } from '../../lib';
import { CheckoutFsm, type CheckoutState } from './checkout.fsm';

/** An order occupies its key while live and after it ended (until GC): one checkout per order id. */
const ORDER_SCOPE: DurableStatus[] = [
  'runnable',
  'executing',
  'awaiting_signal',
  'awaiting_children',
  'done',
  'failed',
];
const DEFAULT_PAYMENT_TIMEOUT_MS = 15 * 60_000;
const STATUS_WAIT_MS = 1_000;
const ORDER_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The slice of the HTTP response the status route uses (status code and a header). */
interface StatusResponse {
  status(code: number): unknown;
  setHeader(name: string, value: string): unknown;
}

const orderKey = (orderId: string): string => `order:${orderId}`;

/**
 * The checkout HTTP API:
 * - `POST /orders` `{ orderId?, lines: [{ sku, qty }], paymentTimeoutMs? }` inserts the
 *   checkout keyed `order:<orderId>` → 201 `{ orderId, instanceId }`; an existing order → 409.
 * - `POST /orders/:id/payment` `{ amount, reference }` signals `payment_confirmed` by key,
 *   deduplicated by the PSP reference: a retried webhook is a no-op → 202 (also after the
 *   order completed with that payment); an order no longer waiting → 409; unknown → 404.
 * - `GET /orders/:id` waits up to 1 s for the order to settle: 200 with the outcome once it
 *   ended, else 202 with `Retry-After` (docs/signals.md, "busy is not an error").
 */
@Controller('orders')
export class CheckoutController {
  constructor(private readonly engine: EngineService) {}

  @Post()
  @HttpCode(201)
  async create(@Body() body: unknown): Promise<{ orderId: string; instanceId: string }> {
    const state = parseOrder(body);
    try {
      const instanceId = await this.engine.insert(CheckoutFsm, {
        state: { ...state },
        correlationKey: orderKey(state.orderId),
        correlationScope: ORDER_SCOPE,
      });
      return { orderId: state.orderId, instanceId };
    } catch (err) {
      if (err instanceof DuplicateError) {
        throw new ConflictException(`order ${state.orderId} already exists`);
      }
      throw err;
    }
  }

  @Post(':id/payment')
  @HttpCode(202)
  async pay(@Param('id') orderId: string, @Body() body: unknown): Promise<{ accepted: true }> {
    const payment = parsePayment(body);
    try {
      await this.engine.signal(
        { correlationKey: orderKey(orderId) },
        'payment_confirmed',
        payment,
        { dedupKey: payment.reference },
      );
      return { accepted: true };
    } catch (err) {
      if (!(err instanceof NoTargetError)) throw err;
      // The key still names a finished order (its scope holds it until GC), or nothing at all.
      const order = await this.engine.get({ correlationKey: orderKey(orderId) });
      if (!order) throw new NotFoundException(`no order ${orderId}`);
      // A webhook retried after the order completed with this very payment is still a success.
      if (order.status === 'done' && order.result?.['reference'] === payment.reference) {
        return { accepted: true };
      }
      throw new ConflictException(`order ${orderId} is not waiting for a payment`);
    }
  }

  @Get(':id')
  async status(
    @Param('id') orderId: string,
    @Res({ passthrough: true }) res: StatusResponse,
  ): Promise<Record<string, unknown>> {
    const order = await this.engine.get({ correlationKey: orderKey(orderId) });
    if (!order) throw new NotFoundException(`no order ${orderId}`);
    const answer = await this.engine.await(order.id, { timeout: STATUS_WAIT_MS });
    switch (answer.kind) {
      case 'done':
        return { orderId, status: 'paid', ...answer.result };
      case 'failed':
        return { orderId, status: 'failed', error: answer.error };
      case 'cancelled':
        return { orderId, status: 'cancelled', reason: answer.reason };
      case 'awaiting':
      case 'busy': {
        res.status(202);
        res.setHeader('Retry-After', '1');
        const { status, step } = answer.snapshot;
        return {
          orderId,
          status: status === 'awaiting_signal' ? 'awaiting_payment' : 'processing',
          step,
        };
      }
      case 'not_found':
        throw new NotFoundException(`no order ${orderId}`);
    }
  }
}

function parseOrder(body: unknown): CheckoutState {
  if (typeof body !== 'object' || body === null) {
    throw new BadRequestException('body must be a JSON object');
  }
  const {
    orderId = randomUUID(),
    lines,
    paymentTimeoutMs = DEFAULT_PAYMENT_TIMEOUT_MS,
  } = body as Record<string, unknown>;
  if (typeof orderId !== 'string' || !ORDER_ID.test(orderId)) {
    throw new BadRequestException('orderId must match [A-Za-z0-9_-]{1,64}');
  }
  if (!Array.isArray(lines) || lines.length === 0) {
    throw new BadRequestException('lines must be a non-empty array');
  }
  const parsed = lines.map((line: unknown, i) => {
    const { sku, qty } = (typeof line === 'object' && line !== null ? line : {}) as Record<
      string,
      unknown
    >;
    if (typeof sku !== 'string' || sku.length === 0) {
      throw new BadRequestException(`lines[${i}].sku must be a non-empty string`);
    }
    if (typeof qty !== 'number' || !Number.isInteger(qty) || qty < 1) {
      throw new BadRequestException(`lines[${i}].qty must be an integer ≥ 1`);
    }
    return { sku, qty };
  });
  if (
    typeof paymentTimeoutMs !== 'number' ||
    !Number.isInteger(paymentTimeoutMs) ||
    paymentTimeoutMs < 1
  ) {
    throw new BadRequestException('paymentTimeoutMs must be an integer ≥ 1 (ms)');
  }
  return { orderId, lines: parsed, paymentTimeoutMs };
}

function parsePayment(body: unknown): { amount: number; reference: string } {
  const { amount, reference } = (typeof body === 'object' && body !== null ? body : {}) as Record<
    string,
    unknown
  >;
  if (typeof amount !== 'number' || !Number.isFinite(amount)) {
    throw new BadRequestException('amount must be a number');
  }
  if (typeof reference !== 'string' || reference.length === 0) {
    throw new BadRequestException('reference must be a non-empty string');
  }
  return { amount, reference };
}
