import { Logger } from '@nestjs/common';

import type { FsmDefinition } from '../discovery/fsm-definition';
import type { FsmRegistry } from '../discovery/fsm.registry';
import { StepCancelledError } from '../errors/step-cancelled.error';
import { retry, stop } from '../fsm/outcome';
import type { StepContext } from '../fsm/step-context';
import type { ResolvedOptions } from '../options/resolved-options';
import type { ClaimedRow } from './claimed-row';
import type { FlushEntry } from './flush-entry';
import { retryRule } from './job-outcome';
import { historyMark, outcomeToEntry, throttleEntry } from './outcome-entry';
import { rowClosures, thrownRetryAfterMs } from './throttle-closures';
import { rawContext } from './step-contexts';
import { describeThrown, thrownErrorJson, thrownErrorText } from './step-failure';
import type { StepRun } from './step-run';

/**
 * Routes a step's throw to its outcome (docs/design.md §2.7): a throw caused by the instance's
 * cancel commits as cancelled; otherwise `onError` decides, or a job's retry rule (§13), or the
 * instance stops. Logs one line per throw and records the error in history (§28.1).
 */
export class ThrowRouter {
  private readonly logger = new Logger('GenDurable');

  constructor(
    private readonly registry: FsmRegistry,
    private readonly options: ResolvedOptions,
  ) {}

  /** `original` is the step's context, when it got one. */
  async route(
    err: unknown,
    row: ClaimedRow,
    definition: FsmDefinition,
    original: StepContext<unknown> | undefined,
    run: StepRun,
  ): Promise<FlushEntry> {
    const text = thrownErrorText(err);
    const signal = (original ?? rawContext(row, run, this.options.maxStateBytes)).signal;
    if (signal.aborted && signal.reason instanceof StepCancelledError && original) {
      // docs/design.md §27.2: the step stopped because its instance was cancelled (it threw
      // the reason, or what its aborted work threw). Not a failure: a non-terminal outcome,
      // which the flush commits as cancelled (the request is on the row); onError is not asked.
      this.logger.warn(
        `step "${row.step}" of ${row.fsm}#${row.id} stopped on its cancel (threw ${describeThrown(err)})`,
      );
      return outcomeToEntry(
        retry(original.state, 0),
        row,
        definition,
        this.registry,
        this.options,
        [],
      );
    }
    let entry: FlushEntry;
    let handlerError: unknown;
    const retryAfterMs = thrownRetryAfterMs(err);
    if (retryAfterMs !== undefined) {
      // docs/jobs.md, "Backing off on 429": the row's own limits close and the step runs again
      // after the delay without spending an attempt; onError is not asked.
      const closes = rowClosures(row, this.options, retryAfterMs);
      entry = throttleEntry(row, [], definition.history, retryAfterMs, closes, true);
      entry = { ...entry, error: text };
      this.logThrow(row, err, entry, undefined);
      if (definition.history === 'off') return entry;
      return Object.assign({}, entry, { thrown: thrownErrorJson(err) });
    }
    try {
      const state: unknown = original ? original.state : row.state;
      const base = original ?? rawContext(row, run, this.options.maxStateBytes);
      const ctx: StepContext<unknown> = {
        id: base.id,
        fsm: base.fsm,
        fsmVersion: base.fsmVersion,
        step: base.step,
        attempt: base.attempt,
        state,
        awaited: [],
        all: [],
        children: [],
        signal: base.signal,
        progress: (value: unknown) => base.progress(value),
        lastProgress: base.lastProgress,
        // The step's writes ended with it: onError's are refused (docs/streams.md).
        stream: (name: string) => base.stream(name),
      };
      let outcome: unknown;
      if (definition.onError) outcome = await definition.onError(err, ctx);
      else if (definition.kind === 'job') outcome = retryRule(text, ctx, definition);
      else outcome = stop(text);
      entry = outcomeToEntry(outcome, row, definition, this.registry, this.options, []);
      // A retried throw keeps its error in last_error while the row backs off.
      if (entry.kind === 'retry') entry = { ...entry, error: text };
    } catch (secondErr) {
      handlerError = secondErr;
      entry = outcomeToEntry(
        stop(thrownErrorText(secondErr)),
        row,
        definition,
        this.registry,
        this.options,
        [],
      );
    }
    this.logThrow(row, err, entry, handlerError);
    if (definition.history === 'off') return entry;
    // docs/design.md §28.1: a thrown error is recorded at every level but 'off', with the error
    // that decided the outcome (onError's own, when it threw).
    return Object.assign({}, entry, {
      history: historyMark(definition.history, entry.kind, true),
      thrown: thrownErrorJson(handlerError ?? err),
    });
  }

  /**
   * One log line per thrown step (docs/design.md §28.1): fsm, id, step, attempt and the error's
   * class and message — `warn` when the instance goes on (a retry, or whatever `onError` chose),
   * `error` with the stack when it stops. Never the state or a payload.
   */
  private logThrow(row: ClaimedRow, err: unknown, entry: FlushEntry, handlerError: unknown): void {
    const where = `step "${row.step}" of ${row.fsm}#${row.id} (attempt ${row.attempt})`;
    const thrown = `${where} threw ${describeThrown(err)}`;
    if (entry.kind === 'stop') {
      const because =
        handlerError === undefined ? '' : `; onError threw ${describeThrown(handlerError)}`;
      const stack =
        (handlerError ?? err) instanceof Error ? thrownErrorText(handlerError ?? err) : undefined;
      this.logger.error(`${thrown}${because}; the instance fails`, stack);
    } else if (entry.kind === 'retry') {
      this.logger.warn(`${thrown}; retried in ${entry.delayMs} ms`);
    } else if (entry.kind === 'throttle') {
      this.logger.warn(`${thrown}; throttled, runs again in ${entry.delayMs} ms`);
    } else {
      this.logger.warn(`${thrown}; onError chose ${entry.kind}`);
    }
  }
}
