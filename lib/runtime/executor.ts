import { Logger } from '@nestjs/common';

import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { UnknownStepError } from '../errors/unknown-step.error';
import { limitName } from '../fsm/limit-key';
import { type EntryKind, OUTCOME_KINDS, type TallyKind } from '../fsm/outcome-kinds';
import type { StepContext } from '../fsm/step-context';
import type { ResolvedOptions } from '../options/resolved-options';
import type { Telemetry } from '../telemetry/telemetry';
import type { StepSpan, StepTracer } from '../telemetry/otel-span-types';
import { withTraceContext } from '../instance/insert-row';
import type { ClaimedRow } from './claimed-row';
import { faultPoint, FAULTS_ENABLED } from './fault-points';
import type { FlushEntry, FlushReply } from './flush-entry';
import type { Flusher } from './flusher';
import { outcomeToEntry } from './outcome-entry';
import type { RunAhead } from './run-ahead';
import { RunningSteps } from './running-steps';
import { StepRun } from './step-run';
import type { StreamBatcher } from './stream-batcher';
import { StepStreams } from './step-streams';
import { jobOutcome } from './job-outcome';
import { ProducedStep } from './produced-step';
import { interceptedStep } from './intercepted-step';
import { withSchemaOutputs } from './outcome-schemas';
import { stepContext } from './step-contexts';
import { ThrowRouter } from './throw-router';
import type { StepTransaction, TransactionalSteps } from './transactional-step';
import { isThenable, settledQuietly } from '../util/thenable';

/** No awaited signals (and no ids): one frozen array for every step that awaited none. */
const NONE: readonly never[] = Object.freeze([]);

/** What happened to one claimed row: the flusher's reply (or the crash path) and the outcome kind. */
export interface ExecutionResult {
  readonly reply: FlushReply | 'crash';
  /** The tally counter of the last outcome (of the last step of an inline chain). */
  readonly kind: TallyKind | null;
}

export interface ExecuteOptions {
  /**
   * Asked before each inline hand-off (docs/design.md §7): true lets an inline `next` run its next step
   * on the held claim. Absent (the testing drain) = never chain.
   */
  readonly chain?: () => boolean;
  /**
   * Called once the row runs no more steps and its last outcome goes to the flusher (not for
   * an inline continue, nor on the crash path): the scheduler frees the row's running slot
   * then, and keeps holding the row until `execute` resolves with the flush's answer.
   */
  readonly onStepsDone?: () => void;
  /**
   * Called when a step ran past its timeout and the executor stopped waiting for it
   * (docs/design.md §27.5): its outcome is routed as a `StepTimeoutError`, while the step's own
   * promise may still run. `settled` resolves once it settles; the scheduler keeps counting
   * the step against `concurrency` until then.
   */
  readonly onAbandoned?: (settled: Promise<void>) => void;
}

/** The tally counter of a committed entry: its kind's, or `cancelled` when it ended so. */
function tallyOf(kind: EntryKind, reply: FlushReply): TallyKind {
  return reply === 'cancelled' ? OUTCOME_KINDS.cancel.tally : OUTCOME_KINDS[kind].tally;
}

/**
 * Runs one claimed row: builds the StepContext, calls the step, routes throws to `onError`
 * (docs/design.md §2.7), maps job results (§13), validates and serializes the outcome, and awaits its
 * commit through the flusher before returning. Never throws.
 */
export class Executor {
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly registry: FsmRegistry,
    private readonly options: ResolvedOptions,
    private readonly telemetry: Telemetry,
    private readonly flusherFor: (queue: string) => Flusher,
    /** Inline execution (docs/design.md §7); absent = never run ahead. */
    private readonly runAhead: RunAhead | undefined,
    /**
     * Step spans (docs/design.md §31), present when `@opentelemetry/api` is installed and
     * `otel.enabled`. It answers undefined (allocating nothing) while no tracer provider is
     * registered.
     */
    private readonly stepTracer: StepTracer | undefined,
    /**
     * A running step of `queue` has a `ctx.progress` value to store: its scheduler writes it
     * within a second (docs/design.md §28.2). Absent = the heartbeat carries it.
     */
    private readonly onProgress?: (queue: string) => void,
    /** Transactional steps' transactions (docs/transactional-steps.md); absent = none run here. */
    private readonly transactions?: TransactionalSteps,
    /** The engine's stream writes (docs/streams.md); absent = `ctx.stream` is not available. */
    private readonly streams?: StreamBatcher,
  ) {
    this.throws = new ThrowRouter(registry, options);
    this.running = new RunningSteps(telemetry);
  }

  /** A run's `ctx.stream` writers, under its claim (docs/streams.md). */
  private readonly openStreams = (run: StepRun): StepStreams | undefined => {
    const worker = run.row.worker;
    if (this.streams === undefined || worker === undefined) return undefined;
    const { id, fsm, step, claimSeq } = run.row;
    return new StepStreams(
      this.streams,
      { id, fsm, step, claimSeq, worker },
      this.options.maxStateBytes,
    );
  };

  private readonly throws: ThrowRouter;
  private readonly progressPending = (run: StepRun): void => {
    if (run.row.queue !== undefined) this.onProgress?.(run.row.queue);
  };

  /** The steps running in this process now: what aborts, progress and the testing helpers reach. */
  readonly running: RunningSteps;

  /**
   * Runs `row`'s step and commits its outcome; with `options.chain`, an inline `next` runs the
   * following steps on the same claim until one is not inlined (docs/design.md §7). One async
   * frame for the whole chain: `row` is the scheduler's object for the claim, `current` the
   * step being run (the same object but for inline continuations).
   */
  async execute(row: ClaimedRow, options: ExecuteOptions = {}): Promise<ExecutionResult> {
    let current = row;
    for (;;) {
      const definition = this.registry.find(current.fsm, current.fsmVersion);
      if (!definition) {
        // A rolling deploy: another node may run it. Never stop it; the reaper retries (§2.7).
        return this.crash(
          current,
          `no FSM "${current.fsm}" version ${current.fsmVersion} is registered on this node`,
        );
      }
      const started = performance.now();
      // The row's first step: its first claim, not an inline continuation (docs/design.md §31).
      const span = this.stepTracer?.startStep(current, current === row && current.claimSeq === '1');
      // A transactional step (docs/transactional-steps.md): no run-ahead, no group commit.
      const txn = definition.transactional.has(current.step)
        ? this.transactions?.begin(definition.timeouts.get(current.step))
        : undefined;
      let entry: FlushEntry;
      try {
        const produced =
          span === undefined
            ? this.produce(current, definition, options, txn)
            : span.within(async () => this.produce(current, definition, options, txn, span));
        entry = produced instanceof Promise ? await produced : produced;
      } catch (err) {
        await txn?.close(err);
        span?.end('crash');
        return this.crash(current, `internal error building the outcome: ${String(err)}`);
      }
      if (span !== undefined) {
        // Children the step scheduled carry its span's context: their first steps are its children.
        const traceContext = span.traceContext;
        if ('children' in entry && traceContext !== null) {
          entry = {
            ...entry,
            children: entry.children.map((r) => withTraceContext(r, traceContext)),
          };
        }
        span.end(entry.kind);
      }
      if (
        entry.kind === 'next' &&
        entry.rateLimit !== null &&
        this.options.rateLimits[limitName(entry.rateLimit)] === undefined
      ) {
        // Never granted: the row will stall at its window head (docs/design.md §15, §24.3 item 4).
        const name = limitName(entry.rateLimit);
        this.telemetry.emit(
          'rate_limit:unknown',
          { count: 1 },
          { key: entry.rateLimit, name, fsm: current.fsm, step: current.step },
        );
      }
      if (this.telemetry.wants('step:stop')) {
        this.telemetry.emit(
          'step:stop',
          { durationMs: performance.now() - started },
          { id: current.id, fsm: current.fsm, step: current.step, kind: entry.kind },
        );
      }
      if (FAULTS_ENABLED) {
        await faultPoint('step.beforeOutcome', { ids: [current.id], worker: current.worker });
      }
      if (
        entry.kind === 'next' &&
        entry.inline === true &&
        txn === undefined &&
        this.runAhead &&
        options.chain?.() === true
      ) {
        const step = await this.runAhead.advance(row, current, entry);
        if (step.kind === 'continue') {
          current = step.row;
          continue;
        }
        if (step.kind === 'ended') return { reply: step.reply, kind: tallyOf('next', step.reply) };
        if (step.kind === 'crash') return this.crash(current, step.error);
      }
      options.onStepsDone?.();
      const reply = txn ? await txn.finish(entry, (e) => this.commit(e)) : await this.commit(entry);
      if (reply === 'stale') {
        this.telemetry.emit(
          'outcome:stale',
          { count: 1 },
          { id: current.id, fsm: current.fsm, step: current.step, kind: entry.kind },
        );
      } else if (reply === 'error') {
        this.telemetry.emit(
          'executor:crash',
          { count: 1 },
          { id: current.id, fsm: current.fsm, step: current.step, error: 'flush failed' },
        );
      }
      return { reply, kind: tallyOf(entry.kind, reply) };
    }
  }

  /**
   * Hands an entry to its queue's flusher and waits for the answer: the flush's, or `error` from
   * the flusher's watchdog once it waited longer than a flush can retry (docs/design.md §6.4).
   */
  commit(entry: FlushEntry): Promise<FlushReply> {
    return new Promise<FlushReply>((resolve) =>
      this.flusherFor(entry.queue).enqueue(entry, resolve),
    );
  }

  private crash(row: ClaimedRow, error: string): ExecutionResult {
    this.logger.error(
      `executor crash on ${row.fsm}#${row.id} step ${row.step}: ${error}; the row stays executing for the reaper`,
    );
    this.telemetry.emit(
      'executor:crash',
      { count: 1 },
      { id: row.id, fsm: row.fsm, step: row.step, error },
    );
    return { reply: 'crash', kind: null };
  }

  /**
   * The guarded region (docs/design.md §2.7): step, validation, dump, serialization, child
   * expansion. A step with a timeout races its deadline (docs/design.md §27.5); past it, the
   * outcome is a `StepTimeoutError` through the throw router whatever the step does later.
   * A step that returns its outcome without a promise, with no stream writes or async schema
   * to wait for, is produced without an await: the answer is the entry itself (an async
   * function and its await were ≈ 600 bytes a step of the drain's allocation,
   * docs/performance.md "Allocation per step"); any other answers a promise of it.
   */
  private produce(
    row: ClaimedRow,
    definition: FsmDefinition,
    options: ExecuteOptions,
    txn: StepTransaction | undefined,
    span?: StepSpan,
  ): FlushEntry | Promise<FlushEntry> {
    const awaited = row.awaits ? row.inbox.filter((s) => row.awaits?.includes(s.name)) : NONE;
    const run = new StepRun(
      row,
      definition.timeouts.get(row.step),
      this.progressPending,
      this.openStreams,
    );
    const ids = awaited.length === 0 ? NONE : awaited.map((s) => s.id);
    const step = new ProducedStep(row, definition, txn, span, run, ids);
    try {
      txn?.open();
      const ctx = stepContext(
        row,
        definition,
        awaited,
        row.inbox,
        row.children,
        run,
        this.options.maxStateBytes,
        txn?.manager,
      );
      step.ctx = ctx;
      const fn = definition.steps.get(row.step);
      if (!fn) throw new UnknownStepError(definition.name, row.step);
      const interceptors = definition.interceptors;
      if (run.timeoutMs !== undefined) {
        return this.producedLater(this.runTimed(fn, ctx, run, options, interceptors), step, false);
      }
      // No deadline (the common case): registered for its signal, no race, no extra hop.
      this.running.register(run);
      let returned: unknown;
      try {
        // No interceptor (the common case): the step is called bare (docs/interceptors.md).
        returned = interceptors === undefined ? fn(ctx) : interceptedStep(interceptors, fn, ctx);
      } catch (err) {
        this.running.unregister(run);
        throw err;
      }
      if (isThenable(returned)) return this.producedLater(returned, step, true);
      this.running.unregister(run);
      return this.entryOf(returned, step);
    } catch (err) {
      return this.thrown(err, step);
    }
  }

  /** The step returned a promise (or has a deadline): its entry once it settles. */
  private async producedLater(
    pending: PromiseLike<unknown>,
    step: ProducedStep,
    registered: boolean,
  ): Promise<FlushEntry> {
    let value: unknown;
    try {
      try {
        value = await pending;
      } finally {
        if (registered) this.running.unregister(step.run);
      }
    } catch (err) {
      return this.thrown(err, step);
    }
    return this.entryOf(value, step);
  }

  /** The entry of a step's returned value, after its stream writes and schemas. */
  private entryOf(value: unknown, step: ProducedStep): FlushEntry | Promise<FlushEntry> {
    try {
      // docs/streams.md: the step's writes commit before its outcome; a failed one fails it.
      const streams = step.run.settleStreams();
      if (streams !== undefined) return this.entryAfterStreams(streams, value, step);
    } catch (err) {
      return this.thrown(err, step);
    }
    return this.outcomeEntry(value, step);
  }

  private async entryAfterStreams(
    streams: NonNullable<ReturnType<StepRun['settleStreams']>>,
    value: unknown,
    step: ProducedStep,
  ): Promise<FlushEntry> {
    try {
      const failed = await streams;
      if (failed !== undefined) throw failed.error;
    } catch (err) {
      return this.thrown(err, step);
    }
    return this.outcomeEntry(value, step);
  }

  /** The entry of a returned value whose stream writes are settled: job outcome, schemas. */
  private outcomeEntry(value: unknown, step: ProducedStep): FlushEntry | Promise<FlushEntry> {
    try {
      const { definition } = step;
      let outcome = definition.kind === 'job' ? jobOutcome(value, step.ctx!, definition) : value;
      if (definition.resultSchema !== undefined || this.registry.hasStateSchemas) {
        // docs/schemas.md: a refused result or child state is a step throw, through onError.
        const checked = withSchemaOutputs(outcome, definition, this.registry);
        if (checked instanceof Promise) return this.entryAfterSchemas(checked, step);
        outcome = checked;
      }
      return this.toEntry(outcome, step);
    } catch (err) {
      return this.thrown(err, step);
    }
  }

  private async entryAfterSchemas(
    checked: Promise<unknown>,
    step: ProducedStep,
  ): Promise<FlushEntry> {
    try {
      return this.toEntry(await checked, step);
    } catch (err) {
      return this.thrown(err, step);
    }
  }

  private toEntry(outcome: unknown, step: ProducedStep): FlushEntry {
    const { row, definition } = step;
    return outcomeToEntry(outcome, row, definition, this.registry, this.options, step.awaitedIds);
  }

  /** A step (or its outcome) threw: through the throw router, after its stream writes. */
  private async thrown(err: unknown, step: ProducedStep): Promise<FlushEntry> {
    const { run } = step;
    // Its writes, even of a step that threw or timed out, commit (or fail) before its outcome.
    const streams = run.settleStreams();
    if (streams !== undefined) await streams;
    step.txn?.stepThrew(run.overdue() !== undefined, err);
    step.span?.thrown(err);
    return this.throws.route(err, step.row, step.definition, step.ctx, run);
  }

  /**
   * Calls a step that has a timeout with its run registered (so its signal can be aborted),
   * raced against its deadline. Past the deadline it throws the `StepTimeoutError`,
   * even when the step returned or threw after it, and hands the still-running step's promise
   * to `onAbandoned`: nothing awaits it any more, its rejection is handled (Promise.race
   * subscribed to it) and its value is dropped.
   */
  private async runTimed(
    step: (ctx: StepContext<unknown>) => unknown,
    ctx: StepContext<unknown>,
    run: StepRun,
    options: ExecuteOptions,
    interceptors: FsmDefinition['interceptors'],
  ): Promise<unknown> {
    this.running.register(run);
    let pending: unknown;
    let settled = false;
    try {
      run.start();
      pending = interceptors === undefined ? step(ctx) : interceptedStep(interceptors, step, ctx);
      const value = await run.settle(pending);
      settled = true;
      const late = run.overdue();
      if (late) throw late;
      return value;
    } catch (err) {
      const timedOut = run.overdue();
      if (!timedOut) throw err;
      this.running.emitAbort(run);
      // Settled = it returned or threw late (the engine saw it): nothing is left running.
      if (!settled && isThenable(pending) && err === timedOut) {
        options.onAbandoned?.(settledQuietly(pending));
      }
      throw timedOut;
    } finally {
      run.end();
      this.running.unregister(run);
    }
  }
}
