import { NotAvailableError } from '../errors/not-available.error';
import { StepTimeoutError } from '../errors/step-timeout.error';
import type { DurableStream } from '../fsm/durable-stream';
import type { StepAbortReason } from '../fsm/step-abort';
import type { StepStreams, StreamsSettled } from './step-streams';

/** What a run knows of its row, for its timeout error. */
interface RunRow {
  readonly id: string;
  readonly fsm: string;
  readonly step: string;
  readonly claimSeq: string;
  /** The worker id that holds the claim (absent on rows not read by a claim). */
  readonly worker?: string;
  /** The row's queue (absent on rows not read by a claim). */
  readonly queue?: string;
}

/**
 * One running step's `ctx.signal` and deadline (docs/design.md §27.5). The AbortController is
 * made on the first read of `signal` (a step that never reads it costs none); an abort before
 * that read hands the step an already aborted signal. With a timeout, `start()` arms the
 * deadline before the step is called and `settle(value)` races the step against it: at the
 * deadline (or `expireNow()`) the signal aborts with a `StepTimeoutError` and `settle` rejects
 * with it, whatever the step does afterwards.
 */
export class StepRun {
  private controller: AbortController | undefined;
  private reason: StepAbortReason | undefined;
  private timer: NodeJS.Timeout | undefined;
  private expire: ((err: StepTimeoutError) => void) | undefined;
  private deadline: Promise<never> | undefined;
  private startedAt = 0;
  /** Set once the deadline passed: the step's own result no longer counts. */
  timedOut: StepTimeoutError | undefined;
  /**
   * The latest `ctx.progress` value as JSON text, not yet stored: the next heartbeat carries it
   * (docs/design.md §28.2). One per running step, so at most one pending value per row.
   */
  pendingProgress: string | undefined;
  /** The run's `ctx.stream` writers, made on the first `ctx.stream()` (docs/streams.md). */
  private streams: StepStreams | undefined;
  private streamsEnded = false;
  /** Its index in the RunningSteps table while registered there, else -1. */
  slot = -1;

  constructor(
    readonly row: RunRow,
    /** The step's timeout, ms; undefined = none. */
    readonly timeoutMs: number | undefined,
    /** Told when a `ctx.progress` value becomes pending (none was), to store it soon. */
    private readonly onPending?: (run: StepRun) => void,
    /** Makes the run's stream writers; absent = `ctx.stream` is not available here. */
    private readonly openStreams?: (run: StepRun) => StepStreams | undefined,
  ) {}

  /** `ctx.stream(name)`: the run's writer of stream `name` (docs/streams.md). */
  stream(name: string): DurableStream {
    let streams = this.streams;
    if (streams === undefined) {
      streams = this.openStreams?.(this);
      if (streams === undefined) {
        throw new NotAvailableError(
          'ctx.stream',
          'this step does not run under a claim of an engine that writes streams',
        );
      }
      this.streams = streams;
      // Opened after the step returned (its onError): its writes are refused as any late one.
      if (this.streamsEnded) void streams.settle();
    }
    return streams.stream(name);
  }

  /**
   * The step settled or was abandoned: later writes are refused, and the pending ones are
   * waited for; the first failure of any, or undefined. Undefined at once when the step opened
   * no stream (no promise, no hop).
   */
  settleStreams(): Promise<StreamsSettled> | undefined {
    this.streamsEnded = true;
    return this.streams?.settle();
  }

  /** `ctx.progress` reported `text` (valid JSON): the latest value, pending until stored. */
  reportProgress(text: string): void {
    const first = this.pendingProgress === undefined;
    this.pendingProgress = text;
    if (first) this.onPending?.(this);
  }

  /** The step's `ctx.signal`. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason !== undefined) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** The reason the signal aborted with, once it did. */
  signalReason(): StepAbortReason | undefined {
    return this.reason;
  }

  /** Aborts the signal with `reason`; false when it had already aborted (the first reason stays). */
  abort(reason: StepAbortReason): boolean {
    if (this.reason !== undefined) return false;
    this.reason = reason;
    this.controller?.abort(reason);
    return true;
  }

  /** Arms the deadline; called right before the step is called. No timeout: nothing. */
  start(): void {
    const timeoutMs = this.timeoutMs;
    if (timeoutMs === undefined) return;
    this.startedAt = performance.now();
    this.deadline = new Promise<never>((_, reject) => {
      this.expire = reject;
    });
    // Never unhandled, even if the deadline fires before `settle` subscribed.
    this.deadline.catch(ignore);
    this.timer = setTimeout(() => this.expireNow(), timeoutMs);
    this.timer.unref();
  }

  /**
   * The step's value, or a rejection with its `StepTimeoutError` once the deadline passes
   * first. Without a timeout, `value` as it is (no timer, no extra promise).
   */
  settle(value: unknown): unknown {
    // Promise.race subscribes to `value` too: a later rejection of an abandoned step is handled.
    return this.deadline === undefined ? value : Promise.race([value, this.deadline]);
  }

  /**
   * After the step settled: its `StepTimeoutError` when it timed out, or ran past its timeout
   * without the timer getting a turn (a step that blocked the event loop: it expires now);
   * else undefined.
   */
  overdue(): StepTimeoutError | undefined {
    if (this.timedOut) return this.timedOut;
    const timeoutMs = this.timeoutMs;
    if (timeoutMs === undefined || performance.now() - this.startedAt < timeoutMs) return undefined;
    this.expireNow();
    return this.timedOut;
  }

  /** Fires the deadline now (the timer, or a test); false without a timeout or once fired or ended. */
  expireNow(): boolean {
    const expire = this.expire;
    if (expire === undefined || this.timeoutMs === undefined) return false;
    this.expire = undefined;
    this.clearTimer();
    const err = new StepTimeoutError(this.row.fsm, this.row.id, this.row.step, this.timeoutMs);
    this.timedOut = err;
    // The rejection is queued before the abort's listeners run, so it wins any race with
    // what the step does on abort.
    expire(err);
    this.abort(err);
    return true;
  }

  /** The step settled (or was abandoned): no deadline fires any more. */
  end(): void {
    this.expire = undefined;
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function ignore(): void {}
