import { GenDurableError } from './gen-durable.error';

/**
 * A step ran past its timeout (`@DurableFsm({ stepTimeout })` / `@Step({ timeout })`,
 * docs/design.md §27.5). It is the step's `ctx.signal.reason`, and it is routed like a throw of
 * the step: through `onError`, the job retry rule, or `stop` — whether the step honoured the
 * signal, returned late or never returned.
 */
export class StepTimeoutError extends GenDurableError {
  readonly code = 'GD_STEP_TIMEOUT';
  /** The `ctx.signal` cause this error stands for (docs/design.md §27.5). */
  readonly abortCause = 'timeout' as const;
  constructor(
    readonly fsm: string,
    readonly id: string,
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(
      `step "${step}" of ${fsm}#${id} ran past its ${timeoutMs} ms timeout: honour ctx.signal, or raise the step's timeout`,
    );
  }
}
