import { GenDurableError } from './gen-durable.error';

/**
 * The `ctx.signal.reason` of a step whose instance was cancelled while it ran (a cooperative
 * `cancel`, docs/design.md §27.2, §27.5): the owner learnt it at its heartbeat. Stop early;
 * whatever the step returns (or throws, this error included) commits as `cancelled`, unless it
 * ends the instance itself (`done`, `stop`).
 */
export class StepCancelledError extends GenDurableError {
  readonly code = 'GD_STEP_CANCELLED';
  /** The `ctx.signal` cause this error stands for (docs/design.md §27.5). */
  readonly abortCause = 'cancelled' as const;
  constructor(
    readonly fsm: string,
    readonly id: string,
    readonly step: string,
    /** The reason given to `cancel`, or null. */
    readonly reason: string | null,
  ) {
    super(
      `${fsm}#${id} was cancelled while step "${step}" ran${reason === null ? '' : ` (${reason})`}: its outcome will commit as cancelled`,
    );
  }
}
