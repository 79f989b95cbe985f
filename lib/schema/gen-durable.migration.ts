import type { QueryRunner } from 'typeorm';

import {
  type MigrationConnection,
  migrateDown,
  migrateUp,
  type MigrationOptions,
} from './migrator';

function fromQueryRunner(queryRunner: QueryRunner): MigrationConnection {
  return {
    query: (text, parameters) => queryRunner.query(text, parameters),
    get inTransaction() {
      return queryRunner.isTransactionActive;
    },
  };
}

/**
 * The host's one-line TypeORM migration delegates here (docs/design.md §3.6):
 *
 * ```ts
 * export class SetupGenDurable1700000000000 implements MigrationInterface {
 *   up = (qr: QueryRunner) => GenDurableMigration.up(qr);
 *   down = (qr: QueryRunner) => GenDurableMigration.down(qr);
 * }
 * ```
 */
export const GenDurableMigration = {
  /** Creates the schema if needed and applies only the missing increments. */
  up(queryRunner: QueryRunner, options: MigrationOptions = {}): Promise<void> {
    return migrateUp(fromQueryRunner(queryRunner), options);
  },
  /** Reverts from the top down to `options.version` (default 0: every object removed). */
  down(queryRunner: QueryRunner, options: MigrationOptions = {}): Promise<void> {
    return migrateDown(fromQueryRunner(queryRunner), options);
  },
} as const;
