import { GenDurableError } from './gen-durable.error';

/**
 * The `ctx.signal.reason` of a step still running when shutdown's `drainTimeout` ran out
 * (docs/design.md §17.4, §27.5): the node stops waiting for it and the row stays executing
 * until its lease expires and another worker runs the step again.
 */
export class DrainTimeoutError extends GenDurableError {
  readonly code = 'GD_DRAIN_TIMEOUT';
  /** The `ctx.signal` cause this error stands for (docs/design.md §27.5). */
  readonly abortCause = 'drain-timeout' as const;
  constructor(
    readonly fsm: string,
    readonly id: string,
    readonly step: string,
    readonly drainTimeoutMs: number,
  ) {
    super(
      `shutdown stopped waiting for step "${step}" of ${fsm}#${id} after drainTimeout (${drainTimeoutMs} ms): the row is run again elsewhere once its lease expires`,
    );
  }
}
