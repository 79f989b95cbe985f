import { GenDurableError } from './gen-durable.error';

/**
 * The `ctx.signal.reason` of a step whose claim this worker lost while it ran: a heartbeat
 * found the row taken back (its lease expired and it was reaped or re-claimed) or fenced
 * (docs/design.md §27.5). Whatever the step returns is stale and is dropped; stop early.
 */
export class LeaseLostError extends GenDurableError {
  readonly code = 'GD_LEASE_LOST';
  /** The `ctx.signal` cause this error stands for (docs/design.md §27.5). */
  readonly abortCause = 'lease-lost' as const;
  constructor(
    readonly fsm: string,
    readonly id: string,
    readonly step: string,
  ) {
    super(
      `${fsm}#${id} is no longer claimed by this worker (its lease was taken back while step "${step}" ran): the step's outcome will not commit`,
    );
  }
}
