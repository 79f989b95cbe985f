import { GenDurableError } from './gen-durable.error';

/** An FSM name (and version) that no registered `@DurableFsm` provider answers to. */
export class FsmNotRegisteredError extends GenDurableError {
  readonly code = 'GD_FSM_NOT_REGISTERED';
  constructor(
    readonly fsm: string,
    readonly version?: number,
  ) {
    super(
      `no @DurableFsm provider named "${fsm}"${version === undefined ? '' : ` version ${version}`} is registered with this engine: list the class among the module providers (and in \`fsms\` if you restrict them)`,
    );
  }
}
