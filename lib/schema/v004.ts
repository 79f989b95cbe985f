import type { SchemaIncrement } from './schema-increment';

/**
 * Version 4: the terminal status `cancelled` (docs/design.md §27.1). PostgreSQL refuses to use
 * an enum value in the transaction that added it, so this increment only adds the value and
 * version 5 does everything else without naming it as a literal (it runs in the same
 * transaction when the migrator applies both at once, as inside a host's TypeORM migration).
 * `IF NOT EXISTS` keeps `up` idempotent; concurrent `up`s are serialised by the migration lock.
 * `down` leaves the value in place: PostgreSQL cannot drop an enum value, and a release that
 * does not know it never writes it (version 5's `down` turns the rows in it into `failed`).
 */
export const V004: SchemaIncrement = {
  version: 4,
  up: [`ALTER TYPE {schema}.durable_status ADD VALUE IF NOT EXISTS 'cancelled'`],
  down: [],
};
