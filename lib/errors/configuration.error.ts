import { GenDurableError } from './gen-durable.error';

/** Invalid module options or FSM definition; `path` names the offending option or definition. */
export class ConfigurationError extends GenDurableError {
  readonly code = 'GD_CONFIGURATION';
  constructor(
    readonly path: string,
    problem: string,
  ) {
    super(`invalid gen-durable configuration at ${path}: ${problem}`);
  }
}
