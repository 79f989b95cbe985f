import { GenDurableError } from './gen-durable.error';

/** The database schema is not at the version this library needs. */
export class SchemaVersionError extends GenDurableError {
  readonly code = 'GD_SCHEMA_VERSION';
  constructor(
    readonly schema: string,
    readonly installed: number,
    readonly required: number,
  ) {
    super(
      `gen-durable schema "${schema}" is at version ${installed}, this library needs ${required}: run GenDurableMigration.up(queryRunner, { schema: "${schema}" }) in a migration`,
    );
  }
}
