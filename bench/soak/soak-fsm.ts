/**
 * The soak's workload (docs/performance.md, "Soak"): a 3-step FSM (a → b → c → done) whose
 * state carries the insert time and the trail of steps that committed, and the in-process
 * ledger its steps write: steps run, runs per instance and step (re-runs), and insert→start
 * latencies of the current window.
 */
import { DurableFsm, done, next, Step, type StepContext } from '../../lib';

export interface SoakState extends Record<string, unknown> {
  /** Date.now() when the inserter called insertAll. */
  readonly t0: number;
  /** The steps whose outcome committed before this one, in order. */
  readonly trail: readonly string[];
}

const STEPS = ['a', 'b', 'c'] as const;

/** Runs per (instance, step), indexed by the instance's numeric id; grows by doubling. */
class RunCounts {
  private counts = new Uint8Array(1 << 16);

  add(id: number): number {
    if (id >= this.counts.length) {
      let size = this.counts.length;
      while (size <= id) size *= 2;
      const grown = new Uint8Array(size);
      grown.set(this.counts);
      this.counts = grown;
    }
    const n = Math.min(255, this.counts[id]! + 1);
    this.counts[id] = n;
    return n;
  }
}

export class StepLedger {
  stepsRun = 0;
  instancesFinished = 0;
  /** Runs of a step of an instance beyond its first (a lost lease, a reap). */
  reruns = 0;
  /** Insert→start of step a, ms, since the last `takeLatencies()`. */
  private latencies: number[] = [];
  private readonly runs = STEPS.map(() => new RunCounts());

  record(step: (typeof STEPS)[number], id: string, t0: number): void {
    const now = Date.now();
    this.stepsRun += 1;
    if (this.runs[STEPS.indexOf(step)]!.add(Number(id)) > 1) this.reruns += 1;
    if (step === 'a') this.latencies.push(now - t0);
    if (step === 'c') this.instancesFinished += 1;
  }

  takeLatencies(): number[] {
    const out = this.latencies;
    this.latencies = [];
    return out;
  }
}

export const ledger = new StepLedger();

@DurableFsm({ name: 'soak3', initial: 'a' })
export class Soak3 {
  @Step() a(ctx: StepContext<SoakState>) {
    ledger.record('a', ctx.id, ctx.state.t0);
    return next('b', { t0: ctx.state.t0, trail: [...ctx.state.trail, 'a'] });
  }

  @Step() b(ctx: StepContext<SoakState>) {
    ledger.record('b', ctx.id, ctx.state.t0);
    return next('c', { t0: ctx.state.t0, trail: [...ctx.state.trail, 'b'] });
  }

  @Step() c(ctx: StepContext<SoakState>) {
    ledger.record('c', ctx.id, ctx.state.t0);
    return done({ trail: [...ctx.state.trail, 'c'] });
  }
}
