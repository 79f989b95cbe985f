import { GenDurableError } from './gen-durable.error';

/** A second engine with a name that is already running in this process. */
export class AlreadyStartedError extends GenDurableError {
  readonly code = 'GD_ALREADY_STARTED';
  constructor(readonly engineName: string) {
    super(
      `a gen-durable engine named "${engineName}" is already running in this process; give the second engine its own \`name\``,
    );
  }
}
