import type { MigrationInterface, QueryRunner } from 'typeorm';

import { GenDurableMigration } from '../../lib/schema/gen-durable.migration';

/**
 * The host's one-line migration (docs/design.md §3.6): gen-durable owns its DDL and applies only the
 * increments this database is missing, so the class never changes when the library's schema
 * does. Pass `{ schema: 'jobs' }` to keep the tables out of `public`.
 */
export class SetupGenDurable1700000000000 implements MigrationInterface {
  name = 'SetupGenDurable1700000000000';

  up(queryRunner: QueryRunner): Promise<void> {
    return GenDurableMigration.up(queryRunner);
  }

  down(queryRunner: QueryRunner): Promise<void> {
    return GenDurableMigration.down(queryRunner);
  }
}
