/**
 * The soak's offered load (docs/performance.md, "Soak"): every tick, as many Soak3 instances as
 * the schedule owes by now (rate ÷ 3 instances per second, the FSM has three steps), in one
 * insertAll, with at most a few calls in flight: an inserter that falls behind catches up with
 * a bigger batch, and its lag shows as offered below the rate.
 */
import type { EngineService } from '../../lib';
import { Soak3, type SoakState } from './soak-fsm';

const TICK_MS = 20;
const MAX_IN_FLIGHT = 4;

export class OfferedInserter {
  /** Instances handed to insertAll. */
  offered = 0;
  /** Ids insertAll answered (every entry is new: no keys, so none is dropped). */
  inserted = 0;
  errors = 0;
  lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private startedAt = 0;

  constructor(
    private readonly engine: EngineService,
    private readonly instancesPerS: number,
  ) {}

  start(): void {
    this.startedAt = performance.now();
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  private tick(): void {
    if (this.inFlight.size >= MAX_IN_FLIGHT) return;
    const owed = Math.floor(((performance.now() - this.startedAt) / 1000) * this.instancesPerS);
    const count = owed - this.offered;
    if (count <= 0) return;
    this.offered += count;
    const t0 = Date.now();
    const state: SoakState = { t0, trail: [] };
    const p = this.engine
      .insertAll(
        Soak3,
        Array.from({ length: count }, () => ({ state })),
      )
      .then(
        (ids) => void (this.inserted += ids.length),
        (err: unknown) => {
          this.errors += 1;
          this.lastError = String(err);
        },
      )
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Stops offering and waits for the calls in flight. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await Promise.allSettled([...this.inFlight]);
  }
}
