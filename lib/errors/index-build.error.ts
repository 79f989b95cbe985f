import { GenDurableError } from './gen-durable.error';

/**
 * An online index build of the migration (docs/schema.md "Online index builds") failed or was
 * interrupted: `index` is left INVALID (or missing) and the next migration rebuilds it. `cause`
 * is PostgreSQL's error.
 */
export class IndexBuildError extends GenDurableError {
  readonly code = 'GD_INDEX_BUILD';
  constructor(
    readonly schema: string,
    readonly index: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(
      `gen-durable schema "${schema}": the online build of index ${index} did not finish (${reason}); it is left invalid and the next migration rebuilds it`,
      options,
    );
  }
}
