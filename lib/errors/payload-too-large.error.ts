import { GenDurableError } from './gen-durable.error';

/** A state, result or payload serialized larger than `maxStateBytes`. Nothing was written. */
export class PayloadTooLargeError extends GenDurableError {
  readonly code = 'GD_PAYLOAD_TOO_LARGE';
  constructor(
    readonly path: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`${path} serializes to ${bytes} bytes, over the ${limit}-byte limit (maxStateBytes)`);
  }
}
