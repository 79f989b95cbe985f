import type { StepAbortReason } from '../fsm/step-abort';
import type { HeldClaim } from '../sql/lease.sql';
import type { Telemetry } from '../telemetry/telemetry';
import type { StepRun } from './step-run';

/** Builds a step's abort reason from what the engine knows of the running step. */
export type AbortReasonFactory = (row: {
  readonly id: string;
  readonly fsm: string;
  readonly step: string;
}) => StepAbortReason;

/**
 * The steps running in this process now (docs/design.md §27.5, §28.2): what an abort of
 * `ctx.signal`, a pending `ctx.progress` value and the testing helpers reach. The executor
 * registers a run while its step is called and removes it once the step settled or was
 * abandoned.
 *
 * A table of slots, not a Map by row id: a Map registered into and removed from once per step
 * rehashed its table every few steps, in the old generation where the long-lived Map lives
 * (≈ 140 bytes of old space a step of the drain, docs/performance.md "Allocation per step").
 * The table and its free list only grow, to the most steps ever running at once; lookups by id
 * (aborts, progress, the testing helpers: never per step) scan it.
 */
export class RunningSteps {
  private readonly slots: (StepRun | undefined)[] = [];
  /** Free slot indexes, a stack: `free[0 … freeCount - 1]`. */
  private readonly free: number[] = [];
  private freeCount = 0;
  private count = 0;

  constructor(private readonly telemetry: Telemetry) {}

  /** The step of `run` is being called: aborts and progress reach it from now on. */
  register(run: StepRun): void {
    if (run.slot >= 0) return;
    const slot = this.freeCount > 0 ? this.free[--this.freeCount]! : this.slots.length;
    this.slots[slot] = run;
    run.slot = slot;
    this.count++;
  }

  /** The step of `run` settled or was abandoned: no abort can reach it any more. */
  unregister(run: StepRun): void {
    const slot = run.slot;
    if (slot < 0 || this.slots[slot] !== run) return;
    this.slots[slot] = undefined;
    run.slot = -1;
    this.free[this.freeCount++] = slot;
    this.count--;
  }

  /** A run of row `id` (under claim `claimSeq` when given) registered here, if any. */
  private find(id: string, claimSeq?: string): StepRun | undefined {
    if (this.count === 0) return undefined;
    for (const run of this.slots) {
      if (run !== undefined && run.row.id === id) {
        if (claimSeq === undefined || run.row.claimSeq === claimSeq) return run;
      }
    }
    return undefined;
  }

  /**
   * Aborts the `ctx.signal` of the step running for row `id` under claim `claimSeq`, with the
   * reason `reason` builds (docs/design.md §27.5). The step goes on until it returns, and the
   * engine keeps waiting for it: only a timeout stops the wait. False when no step of that
   * claim runs here now, or its signal had already aborted.
   */
  abortStep(id: string, claimSeq: string, reason: AbortReasonFactory): boolean {
    const run = this.find(id, claimSeq);
    if (!run) return false;
    const aborted = run.abort(reason(run.row));
    if (aborted) this.emitAbort(run);
    return aborted;
  }

  /** `step:abort` for a run whose signal aborted (by a request or its timeout). */
  emitAbort(run: StepRun): void {
    const reason = run.signalReason();
    if (reason === undefined) return;
    this.telemetry.emit(
      'step:abort',
      { count: 1 },
      { id: run.row.id, fsm: run.row.fsm, step: run.row.step, cause: reason.abortCause },
    );
  }

  /** The claims of the steps running in this process now, with their workers (the testing heartbeat). */
  runningClaims(): { id: string; claimSeq: string; worker: string }[] {
    const out: { id: string; claimSeq: string; worker: string }[] = [];
    for (const run of this.slots) {
      if (run !== undefined && run.row.worker !== undefined) {
        out.push({ id: run.row.id, claimSeq: run.row.claimSeq, worker: run.row.worker });
      }
    }
    return out;
  }

  /**
   * The pending `ctx.progress` values of the steps running under `claims` (same order; null for
   * none), or undefined when none has one (docs/design.md §28.2). The heartbeat carries them;
   * {@link progressStored} then drops those it stored.
   */
  pendingProgress(claims: readonly HeldClaim[]): (string | null)[] | undefined {
    // The runs with a value to store: usually none (a heartbeat then costs one scan).
    let pending: Map<string, StepRun> | undefined;
    for (const run of this.slots) {
      if (run?.pendingProgress !== undefined) (pending ??= new Map()).set(run.row.id, run);
    }
    if (pending === undefined) return undefined;
    let out: (string | null)[] | undefined;
    for (let k = 0; k < claims.length; k++) {
      const claim = claims[k]!;
      const run = pending.get(claim.id);
      const text = run && run.row.claimSeq === claim.claimSeq ? run.pendingProgress : undefined;
      if (text === undefined) continue;
      out ??= new Array<string | null>(claims.length).fill(null);
      out[k] = text;
    }
    return out;
  }

  /**
   * The heartbeat stored `sent` (from {@link pendingProgress}) for the renewed `claims`: each
   * value no newer one replaced meanwhile is no longer pending; `step:progress` is emitted for
   * each stored one whose step still runs here.
   */
  progressStored(
    claims: readonly HeldClaim[],
    sent: readonly (string | null)[],
    renewed: ReadonlySet<string>,
  ): void {
    for (let k = 0; k < claims.length; k++) {
      const text = sent[k];
      const claim = claims[k]!;
      if (text === null || text === undefined || !renewed.has(claim.id)) continue;
      const run = this.find(claim.id, claim.claimSeq);
      if (!run) continue;
      if (run.pendingProgress === text) run.pendingProgress = undefined;
      this.telemetry.emit(
        'step:progress',
        { count: 1 },
        { id: claim.id, fsm: run.row.fsm, step: run.row.step },
      );
    }
  }

  /**
   * Fires the timeout of the step running for row `id` now, as if its deadline had passed
   * (the testing helper `timeoutStep`). False when no step of that row runs here, or it has no
   * timeout, or it already timed out.
   */
  expireStep(id: string): boolean {
    return this.find(id)?.expireNow() ?? false;
  }
}
