import { Injectable } from '@nestjs/common';

/** What a line reservation answers. */
export interface Reservation {
  readonly sku: string;
  readonly qty: number;
  readonly unitPrice: number;
}

/**
 * A stand-in for a stock service, injected into the line-item FSM like any Nest dependency.
 * Prices are fixed; the SKU `sold-out` never has stock, so a sample order can fail a line.
 */
@Injectable()
export class InventoryService {
  private readonly prices: Readonly<Record<string, number>> = { book: 12, pen: 2, ink: 5, mug: 9 };

  reserve(sku: string, qty: number): Reservation {
    if (sku === 'sold-out') throw new Error(`no stock left for ${sku}`);
    const unitPrice = this.prices[sku];
    if (unitPrice === undefined) throw new Error(`unknown sku ${sku}`);
    return { sku, qty, unitPrice };
  }
}
