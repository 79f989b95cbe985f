import type { Telemetry } from '../telemetry/telemetry';

const SAMPLE_MS = 250;

/**
 * Samples event-loop delay (docs/design.md §26.10). A stall longer than `thresholdMs` (the heartbeat
 * interval: every held row's heartbeat stopped with it) emits `scheduler:stall` and marks the
 * node stalled for one more threshold, which `schedulerLiveness` reports as down.
 */
export class StallDetector {
  private timer: NodeJS.Timeout | undefined;
  private expected = 0;
  lastStallAt = 0;
  lastStallMs = 0;

  constructor(
    private readonly thresholdMs: number,
    private readonly telemetry: Telemetry,
  ) {}

  start(): void {
    this.expected = Date.now() + SAMPLE_MS;
    this.timer = setInterval(() => this.sample(), SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** True while a recent stall is within its reporting window. */
  get stalled(): boolean {
    return this.lastStallAt > 0 && Date.now() - this.lastStallAt < this.thresholdMs;
  }

  private sample(): void {
    const now = Date.now();
    const delay = now - this.expected;
    this.expected = now + SAMPLE_MS;
    if (delay > this.thresholdMs) {
      this.lastStallAt = now;
      this.lastStallMs = delay;
      this.telemetry.emit('scheduler:stall', { durationMs: delay }, {});
    }
  }
}
